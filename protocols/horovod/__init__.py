"""A faithful model of Horovod elastic (horovodrun, Gloo controller).

``hosts`` holds the pure decisions over hosts and slots (ordering, assignment, update
classification, blacklist cooldown), ``registry`` the reset barrier and its decision table,
``discovery`` the discovery sources as scenario data, ``driver`` the elastic driver process
(``ssh`` its ssh hop: spawners, their ssh clients and shells),
``state`` the worker's State and notification queue, ``worker`` the elastic run loop, and
``main`` every host's first process (the driver's host runs the driver; every host runs the
task service that starts workers). Behaviour follows ``shared/specs/horovod.md``.

Connections. The spawn (ssh), its exit status, ``rank_and_size`` and the worker's
registration (HTTP), the notifications and the end-of-job shutdown travel over modelled
TCP connections (``conn``): retransmitted through loss and partitions, failing after
``connect_timeout`` (ssh exit 255; the HTTP GET's 3 tries, 0.5 s after each, then abort
134; the registration PUT has no retry, the worker exits 1), a dead worker host noticed by
the ssh session's TCP keepalive (``keepalive_*``, counted from the connect). A process that
ends while its host lives has its connections closed by the host's kernel: the peer learns
at once (a preempted, scaled-down or signalled host's sessions end and ssh exits 255), and
later connects are refused; a crashed or powered-off host says nothing. A ``conn_reset``
fault resets the connections it crosses: an ssh session ends (255, no retry), a
notification attempt or a GET is retried, the registration fails. A kill is SIGTERM, then
SIGKILL after ``kill_grace``, and ends the host's spawners on the driver's side within it.

Collectives. Workers create negotiated groups and name their collectives as upstream does
(the sync's ``model.*`` and ``dict.*``, ``check_host_updates``' ``tuple.*``): ranks that
submit different collectives, or one that does not submit while its process runs, stall
(the controller keeps negotiating, no Gloo timeout), and rank 0's stall inspector warns
every ``stall_check_time`` and shuts down after ``stall_shutdown_time`` if set; the Gloo
timeout applies to a peer that cannot take part (dead, frozen, cut off) and to the
rendezvous. A Gloo error in the re-initialisation aborts the worker (134) unless
``reinit_error`` says otherwise.

Simplified or left out (each would need its own knob to add): only the global Gloo context
is built (not the local and cross ones); the Gloo store's HTTP retries and 10 ms key poll are
folded into the store's own waits; registering a worker's notification service does not
probe it; ``shutdown()`` does not wait for a background thread stuck in a collective; the
ElasticSampler and the TensorFlow wrapper are not modelled; the training allreduces carry
no tensor names (they always match each other). The model and optimizer travel as one blob
(not per-parameter named broadcasts). A ``rank_and_size`` answered after the driver stopped
makes the worker abort at once (upstream it gets its stale slot and aborts when the stopped
server fails its Gloo rendezvous: the same exit 134). A notification is a connect through
the worker's host: refused at once when the process has exited, unanswered
(``notification_timeout`` per attempt) when the host or process is silent; a stopped
(SIGSTOP) recipient, on which upstream's ack read would block forever, also gives up after
``notification_timeout``. Time-keyed discovery schedules (``until_s``) read the driver
host's wall clock. Beyond upstream's exit modes (exception, kill) the scenarios may use hang,
exit0 and silent.

The task services stand for sshd, a daemon outside the job upstream: those of hosts other
than the driver's detach (:meth:`Runtime.detach`), so the run ends once horovodrun and every
worker have, whatever the task services still wait for. The driver holds a connection to
each for the whole job and tells each the job is over through another, retransmitted like
any connection and waited for up to ``connect_timeout`` (except from hosts whose sessions
went silent: likely down), so a lossy link or a partition shorter than that delays a task
service's end but does not lose it; one cut off for longer, or one that never heard from
the driver (a driver killed at its very start), is still waiting when the job is over and
is left running, untraced, as an sshd would be. A task service also ends once its driver's
end of a connection is gone (the driver's process ended while its host lives, or the host
came back without it) and its workers have exited. horovodrun
is not restarted: after a crash_restart of the driver's host its first process records
``hvd_launcher_gone`` and exits, and the job dies with its launcher.

Real mode: the kernel's close of a dead process's connections, ``conn_reset`` of these
connections and the collectives' negotiation are the sim's (the real runtime's message
layer and Gloo groups do not surface them).
"""
