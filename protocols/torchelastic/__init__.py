"""A faithful model of torchelastic (torch 2.13): the c10d dynamic rendezvous.

``state`` holds the shared state and its sweep, ``ops`` the pure decision functions,
``executor`` the loop that applies an action and publishes it with compare-and-set,
``backend`` the c10d store backend. Behaviour follows ``shared/specs/torchelastic.md``
and is differentially tested against torch's own classes.
"""
