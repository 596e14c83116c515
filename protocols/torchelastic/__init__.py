"""A faithful model of torchelastic (torch 2.13): the c10d dynamic rendezvous, the
elastic agent and torchrun's launcher.

``state`` holds the shared state and its sweep, ``ops`` the pure decision functions,
``executor`` the loop that applies an action and publishes it with compare-and-set,
``backend`` the c10d store backend, ``handler`` the rendezvous handler. ``launcher`` is
every host's entry (``launch_agent``), ``agent`` the control loop over its worker
processes (``worker``), ``agent_ranks`` worker rank assignment, ``knobs`` the settings
with torchrun's defaults. Behaviour follows ``shared/specs/torchelastic.md``
and is differentially tested against torch's own classes.
"""
