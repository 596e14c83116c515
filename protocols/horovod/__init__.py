"""A faithful model of Horovod elastic (horovodrun, Gloo controller).

``hosts`` holds the pure decisions over hosts and slots (ordering, assignment, update
classification, blacklist cooldown), ``registry`` the reset barrier and its decision table,
``discovery`` the discovery sources as scenario data, ``driver`` the elastic driver process,
``state`` the worker's State and notification queue, ``worker`` the elastic run loop, and
``main`` every host's first process (the driver's host runs the driver; every host runs the
task service that starts workers). Behaviour follows ``shared/specs/horovod.md``.

Simplified or left out (each would need its own knob to add): only the global Gloo context
is built (not the local and cross ones); the Gloo store's HTTP retries and 10 ms key poll are
folded into the store's own waits; registering a worker's notification service does not
probe it; ``shutdown()`` does not wait for a background thread stuck in a collective; the
ElasticSampler, the TensorFlow wrapper and stall warnings are not modelled. The spawn (ssh),
its exit status and ``rank_and_size`` (HTTP) travel over modelled TCP connections (``conn``):
retransmitted through partitions, failing after ``connect_timeout`` (ssh exit 255, the HTTP
client's 3 attempts then abort 134), a dead worker host noticed by the ssh session's TCP
keepalive (``keepalive_*``, counted from the connect, not from the last segment received); a
kill ends the host's spawners on the driver's side within ``kill_grace``. A kill is SIGTERM,
then SIGKILL after ``kill_grace``.
The model and optimizer travel as one blob (not per-parameter named broadcasts). A
``rank_and_size`` answered after the driver stopped makes the worker abort at once (upstream
it gets its stale slot and aborts when the stopped server fails its Gloo rendezvous: the
same exit 134). A notification is a connect through the worker's host: refused at once when
the process has exited, unanswered (``notification_timeout`` per attempt) when the host or
process is silent; a stopped (SIGSTOP) recipient, on which upstream's ack read would block
forever, also gives up after ``notification_timeout``. Time-keyed discovery schedules
(``until_s``) read the driver host's wall clock. Beyond upstream's exit modes (exception,
kill) the scenarios may use hang, exit0 and silent.

Known divergence left in place (it lives in the sim's collectives, not here): ranks that
issue different collectives (e.g. survivors skipping the sync after a removal while a
freshly spawned rank syncs) stall forever upstream (stall warnings only), but time out
after ``gloo_timeout`` in the sim, so the model resets and recovers where Horovod hangs;
the ``collective_sequence`` check still flags it.
"""
