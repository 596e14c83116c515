"""A faithful model of Horovod elastic (horovodrun, Gloo controller).

``hosts`` holds the pure decisions over hosts and slots (ordering, assignment, update
classification, blacklist cooldown), ``registry`` the reset barrier and its decision table,
``discovery`` the discovery sources as scenario data, ``driver`` the elastic driver process,
``state`` the worker's State and notification queue, ``worker`` the elastic run loop, and
``main`` every host's first process (the driver's host runs the driver; every host runs the
task service that starts workers). Behaviour follows ``shared/specs/horovod.md``.

Simplified or left out (each would need its own knob to add): only the global Gloo context
is built (not the local and cross ones); HTTP retries and the 10 ms key poll are folded into
the store's own waits; registering a worker's notification service does not probe it;
``shutdown()`` does not wait for a background thread stuck in a collective; a dead worker
host is never reported by its spawner, so the barrier waits (upstream's ssh client would
notice only through TCP keepalive, if at all); the ElasticSampler, the TensorFlow wrapper
and stall warnings are not modelled. A kill is SIGTERM, then SIGKILL after ``kill_grace``.
"""
