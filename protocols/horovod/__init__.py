"""A faithful model of Horovod elastic (horovodrun, Gloo controller).

``hosts`` holds the pure decisions over hosts and slots (ordering, assignment, update
classification, blacklist cooldown), ``registry`` the reset barrier and its decision table,
``discovery`` the discovery sources as scenario data, ``driver`` the elastic driver process,
``state`` the worker's State and notification queue, ``worker`` the elastic run loop, and
``main`` every host's first process (the driver's host runs the driver; every host runs the
task service that starts workers). Behaviour follows ``shared/specs/horovod.md``.
"""
