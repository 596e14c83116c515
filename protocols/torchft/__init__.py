"""A faithful model of torchft 0.2.0: per-step fault tolerance by quorum.

``lighthouse_rules`` holds the Lighthouse's pure decisions (``quorum_compute``, the
quorum tick and its id rule) and its state without I/O, ``results`` the Manager server's
pure ``compute_quorum_results``; ``lighthouse`` and ``manager_server`` are the processes
that apply them, ``manager`` one rank's Manager (quorum, reconfiguration, heal,
allreduce, should_commit), ``checkpoint`` the HTTP transport that heals, ``rpc`` the
calls between them, ``train`` the bundled training loop, ``launcher`` every host's entry
(the Lighthouse, or a replica group's launcher), ``knobs`` upstream's defaults with their
sources. ``contract`` says what the model promises and where upstream is known to break
it. Differentially tested against torchft's own Lighthouse and Manager servers
(tests/protocols/torchft).
"""
