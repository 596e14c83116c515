"""Every kind of trace event and its fields, defined once: what the runtimes and protocols
record (:data:`EVENT_KINDS`), what the metrics and reports read, and the protocol-neutral
vocabulary the checks read (:data:`NEUTRAL_KINDS`: the recorded kinds every protocol
records alike, and :data:`TRANSLATED_KINDS`, what each protocol's own events are read as;
:mod:`elastic_sim.vocabulary`). ``python -m elastic_sim.tracedoc`` writes the tables to
docs/trace-events.md; a test keeps both in step with the code (every ``record(kind, ...)``
call uses a kind and fields listed here)."""

from __future__ import annotations

from dataclasses import dataclass

from elastic_sim.trace import STRETCH


@dataclass(frozen=True)
class EventKind:
    """One kind of event: who records it, what it means, and its ``data`` fields."""

    kind: str
    source: str
    """Who records it: runner, runtime (sim and real alike), fault injector, or protocol."""
    meaning: str
    fields: tuple[tuple[str, str], ...] = ()
    """(field, meaning) in the order they are recorded; optional fields end with '?'."""


def _k(kind: str, source: str, meaning: str, *fields: tuple[str, str]) -> EventKind:
    return EventKind(kind, source, meaning, fields)


RUNNER, RUNTIME, INJECTOR = "runner", "runtime", "fault injector"
API, TE, HVD, STATIC, FT = ("protocols/api", "torchelastic", "horovod", "static", "torchft")
EVENT_KINDS: tuple[EventKind, ...] = (
    _k("run_start", RUNNER, "the run begins", ("scenario", "scenario name"), ("seed", "sim seed"),
       ("mode", "sim or real"), ("protocol", "protocol name"),
       ("knobs", "the protocol's knobs: the checks derive their limits and bounds from them"),
       ("coordinator", "host the others must reach: store host, or Horovod's driver host"),
       ("tie_seed?", "seed ordering same-time events, when drawn")),
    _k("run_end", RUNNER, "the run is over", ("outcome", "completed | failed | hung"),
       ("exit_codes", "{proc: exit code}")),
    _k("run_stopped", RUNTIME, "the runtime ended the run early: a livelock (virtual time "
       "stopped advancing) or the tool's wall-clock or memory guard",
       ("reason", "livelock | wall_limit | memory_limit"), ("message", "what ran out"),
       ("spinning?", "{task: callbacks at the stuck instant} (livelock)")),
    _k("proc_start", RUNTIME, "a process starts (<host>/main is the host's first)",
       ("entry", "module:function it runs"), ("pid?", "OS pid (a torchrun worker's)"),
       ("restart_count?", "TORCHELASTIC_RESTART_COUNT it was told (a torchrun worker's)"),
       ("slowed?", "seconds a slow_start delays its entry (sim)")),
    _k("proc_exit", RUNTIME, "a process ends (a daemon, Runtime.detach, still running when "
       "the rest of the run is over has none)", ("code", "exit code (negative: signal)"),
       ("reason", "returned, killed by a signal, host crashed, or the exception"),
       ("pid?", "OS pid (real mode)")),
    _k("fault", INJECTOR, "a scheduled fault starts, heals or is skipped", ("id", "fault id"),
       ("type", "fault type"), ("target", "host, proc, [[group]...] or {src, dst}"),
       ("phase", "start | heal | skipped"), ("reason?", "why skipped / how healed")),
    _k("clock_sync", "cluster coordinator", "a node's clock offset, estimated before the start "
       "(real cluster mode)", ("node", "node index"), ("machine", "machine name"),
       ("address", "control address"), ("hosts", "[host...] it runs"),
       ("offset", "seconds to add to its clock"), ("uncertainty", "seconds")),
    _k("control_refused", "cluster coordinator", "a control message failed authentication",
       ("peer", "sender"), ("why", "reason")),
    _k("group_init", API, "a process group is being created", ("group", "name"),
       ("rank", "rank"), ("size", "size")),
    _k("group_ready", API, "the process group is up", ("group", "name"), ("rank", "rank"),
       ("size", "size")),
    _k("coll_enter", API, "a member enters a collective", ("group", "name"),
       ("seq", "sequence number"), ("op", "operation"), ("nbytes", "payload bytes"),
       ("name?", "the collective's own name, where the protocol gives one (what a "
        "negotiated group matches: Horovod's tensor names)")),
    _k("coll_done", API, "the collective completed for this member", ("group", "name"),
       ("seq", "sequence number"), ("op", "operation")),
    _k("coll_fail", API, "the collective failed or timed out for this member",
       ("group", "name"), ("seq", "sequence number"), ("op", "operation"), ("error", "error"),
       ("peer?", "the group rank whose death failed the call, where the runtime knows it "
        "(the sim)")),
    _k("coll_stall", "runtime (sim)", "rank 0's stall inspector of a negotiated group "
       "(Horovod's controller) sees collectives some members submitted and others did not for "
       "longer than its check time", ("group", "name"),
       ("submitted", "{collective name: [ranks that submitted it]}"),
       ("missing", "{rank: [names it has not submitted]}"),
       ("waited_s", "the longest wait so far"),
       ("shutdown", "whether it shuts the group down (every member's calls fail)")),
    _k("nccl_dump_signal", "runtime (sim)", "this process's NCCL watchdog saw a collective "
       "queued behind its wedged GPU kernel time out and signalled the debug dump; it cannot "
       "tear the process down while the kernel runs, so the heartbeat monitor, with "
       "monitoring on, ends the process (SIGABRT, a proc_exit with code -6) one heartbeat "
       "timeout later",
       ("timed_out_at", "when the collective timed out (the signal follows the profile's "
        "dump delay later)"),
       ("abort_at", "when the monitor ends the process (null: monitoring off, it only logs)")),
    _k("group_failed", API, "joining a process group failed", ("group", "name"),
       ("rank", "rank"), ("size", "size"), ("error", "error"),
       ("peer?", "the group rank whose death failed it, where known")),
    _k("rdzv_join", "all protocols", "a host asks to join a round", ("round", "round id")),
    _k("rdzv_complete", TE, "this host's write decided the round's membership",
       ("round", "round id"), ("members", "[host...] in rank order")),
    _k("rdzv_done", "all protocols", "a member learns the round's membership and its rank",
       ("round", "round id"), ("members", "[host...] in rank order"), ("rank", "its rank"),
       ("world_size", "members"), ("master?", "master address told to the workers"),
       ("store_ops?", "store operations the rendezvous took")),
    _k("rdzv_rejected", STATIC, "the round closed without this host", ("round", "round id")),
    _k("rdzv_failed", STATIC, "the rendezvous gave up", ("round", "round id"),
       ("error", "error")),
    _k("rdzv_leave", STATIC, "members leave a round for a waiting host",
       ("round", "round id"), ("reason", "why")),
    _k("sync", "all protocols", "a member adopted the root's state", ("round", "round id"),
       ("rank", "its rank"), ("root", "root host"), ("step", "step after the sync"),
       ("digest", "state digest after the sync (\"\": a script gave no state)")),
    _k("step", "all protocols", "a training step done", ("round", "round id"),
       ("step", "step number"), ("digest?", "state digest after it (torchft)"),
       ("data?", "batches its data shard has given (torchft's data position)"),
       ("shard?", "the rank's shard of the model: its group rank (torchft)")),
    _k("train_steps", "sim (fast fidelity)", "one member's lockstep stretch of training "
       "steps, read everywhere as its coll_enter / coll_done / step events "
       "(trace.expand_stretches)", ("group", "name"), ("seq", "first step's sequence number"),
       ("op", "allreduce"), ("nbytes", "payload bytes"), ("steps", "steps done"),
       ("open", "whether the next step's allreduce was entered"),
       ("first", "first step's number"), ("start", "when the first step's compute began"),
       ("sleep", "compute seconds per step"), ("cost", "allreduce seconds per step"),
       ("fields", "the step events' other fields (round); null: this member traces no "
                  "step events (a Horovod worker other than the lead)")),
    _k("commit", "all protocols", "progress committed (checkpoint or State.commit)",
       ("step", "step"), ("digest", "state digest (\"\": a script gave no state)")),
    _k("restore", "all protocols", "state rolled back to the last commit", ("step", "step"),
       ("digest", "state digest (\"\": a script gave no state)"), ("reason", "why")),
    _k("job_done", "all protocols", "this host saw the job complete", ("step", "final step"),
       ("digest", "final digest")),
    _k("job_failed", "all protocols", "this host ends the job with an error",
       ("error", "the error")),
    _k("epoch_log", HVD, "a training script's per-epoch log line (rank 0)", ("epoch", ""),
       ("batch", ""), ("commits", ""), ("hostname", ""), ("start_rank", ""), ("rank", ""),
       ("size", ""), ("rendezvous", "")),
    _k("agent_state", TE, "the agent's WorkerState changed", ("state", "WorkerState"),
       ("remaining_restarts", "restarts left")),
    _k("agent_restart", TE, "the agent restarts its workers",
       ("reason", "FAILED | UNHEALTHY (spends a restart) | nodes_waiting (free)"),
       ("nodes_waiting?", "hosts on the wait list"), ("remaining_restarts", "restarts left")),
    _k("agent_signal", TE, "the agent got a death signal", ("signal", "TERM | INT"),
       ("before_workers?", "before its workers existed")),
    _k("workers_started", TE, "the agent started its workers for a round",
       ("round", "round id"), ("base_rank", "first global rank"),
       ("world_size", "global world size"),
       ("restart_count", "TORCHELASTIC_RESTART_COUNT the workers are told")),
    _k("exit_barrier_enter", TE, "a succeeded agent enters the exit barrier",
       ("round", "round id"), ("world_size", "parties it waits for")),
    _k("exit_barrier_done", TE, "the exit barrier tripped for this agent",
       ("round", "round id")),
    _k("exit_barrier_failed", TE, "the exit barrier failed (logged, swallowed)",
       ("error", "error")),
    _k("rdzv_shutdown", TE, "launch_agent's epilogue ran",
       ("closed", "it closed the rendezvous for everyone")),
    _k("rdzv_shutdown_failed", TE, "closing the rendezvous failed", ("error", "error")),
    _k("rdzv_keep_alive_failed", TE, "a heartbeat write failed", ("error", "error")),
    _k("rdzv_graceful_exit", TE, "a spare of a closed rendezvous exits", ("error", "error")),
    _k("torchrun_setup", TE, "--mode torchrun: how the scenario was given to torchrun",
       ("argv", "{host: torchrun's arguments}"),
       ("unmapped", "{knob: upstream's value} for knobs torchrun has no flag for"),
       ("network", "where the run's sockets live")),
    _k("lh_start", FT, "the Lighthouse starts", ("min_replicas", "min_replicas"),
       ("join_timeout", "seconds"), ("heartbeat_timeout", "seconds")),
    _k("lh_quorum", FT, "the Lighthouse issued a quorum", ("quorum_id", "its id"),
       ("rule", "fast (the previous members are all back) | valid (min_replicas, a "
        "majority of the heartbeating replicas, and the join timeout or everyone asked)"),
       ("bump", "why the id is new: membership | commit_failures | null (the same id)"),
       ("members", "[host...] in replica-rank order"), ("replica_ids", "[replica id...]"),
       ("steps", "[step...] each member asked at"),
       ("commit_failures", "[count...] each member's should_commit failures in a row"),
       ("participants", "[replica id...] healthy participants it saw"),
       ("heartbeating", "[replica id...] healthy replicas it saw")),
    _k("mgr_quorum_failed", FT, "a Manager server's Lighthouse request failed",
       ("replica_id", "replica id"), ("attempt", "0 for the first try")),
    _k("ft_replica_start", FT, "a replica group's launcher starts its ranks",
       ("attempt", "0, then one per restart"), ("ranks", "ranks started")),
    _k("ft_replica_failed", FT, "a rank of the replica group failed; the launcher stops the "
       "others", ("attempt", "attempt that failed"), ("exit_codes", "[code...] by group rank "
       "(-1: still running)")),
    _k("ft_quorum", FT, "a rank's view of a quorum (compute_quorum_results)",
       ("quorum_id", "id"), ("replica_id", "its replica id"), ("group_rank", "its rank in "
       "the replica group"), ("replica_rank", "the replica's rank in the quorum"),
       ("replica_world_size", "replicas in the quorum"), ("step", "its step"),
       ("max_step", "the quorum's max step"), ("heal", "it heals"),
       ("src", "host it heals from, or null"), ("dst", "[replica rank...] it sends to"),
       ("store", "store of its process group"), ("commit_failures", "max over members")),
    _k("ft_heal", FT, "a rank fetched the state it heals to", ("quorum_id", "id"),
       ("replica_id", "its replica id"), ("group_rank", "its group rank"), ("src", "source host"),
       ("src_replica_rank", "source's replica rank"), ("step", "healed step"),
       ("digest", "healed state's digest")),
    _k("ft_error", FT, "a rank's error: reported (the step is voted down) or raised (the "
       "process ends)", ("where", "configure | heal | allreduce | start | loop | internal (a bug "
       "of the model in a request handler)"),
       ("error", "the error")),
    _k("ft_should_commit", FT, "a rank's should_commit", ("quorum_id", "id"),
       ("replica_id", "replica id"), ("group_rank", "group rank"), ("vote", "its vote"),
       ("decision", "the replica group's decision"), ("step", "its step after it"),
       ("participants", "replicas at the max step"), ("position", "its data position")),
    _k("hvd_discovery", HVD, "discovery found a change", ("poll", "poll number"),
       ("update", "added | removed | mixed"), ("hosts", "[host:slots...] now offered")),
    _k("hvd_discovery_error", HVD, "the discovery script failed", ("poll", "poll number"),
       ("error", "error"), ("first", "before any host was found")),
    _k("hvd_notify", HVD, "the driver notifies rank 0 of a host change", ("to", "address"),
       ("timestamp", "update time"), ("update", "kind of update")),
    _k("hvd_notify_failed", HVD, "the notification failed", ("to", "address"),
       ("timestamp", "update time"), ("error", "error")),
    _k("hvd_notified", HVD, "a worker received a notification", ("timestamp", "update time"),
       ("update", "kind of update")),
    _k("hvd_interrupt", HVD, "a worker leaves training for a reset",
       ("skip_sync", "HostsUpdatedInterrupt's skip_sync")),
    _k("hvd_ready", HVD, "a worker asks the driver for its new rank (GET rank_and_size: READY "
       "in the reset barrier)", ("round", "the rendezvous id it leaves"),
       ("rank", "its rank there")),
    _k("hvd_record", HVD, "the registry records a slot's state (READY, SUCCESS, FAILURE) "
       "and waits on its reset barrier: each call counts once, a slot recorded twice twice",
       ("rendezvous", "rendezvous id"), ("slot", "host:local_rank"),
       ("state", "the state recorded"), ("parties", "the barrier's parties (the world)")),
    _k("hvd_trip", HVD, "the registry barrier tripped", ("rendezvous", "rendezvous id"),
       ("decision", "success | all_failed | all_blacklisted | reset_limit | reset"),
       ("blacklist", "[host...] blacklisted now"), ("states", "{slot: worker state}")),
    _k("hvd_assign", HVD, "the driver assigns ranks for a rendezvous (a new world)",
       ("rendezvous", "rendezvous id (resets = id - 1)"), ("world_size", "slots"),
       ("ranks", "{host:local_rank: rank}"), ("spawn", "slots spawned afresh")),
    _k("hvd_blacklist", HVD, "the driver blacklists a host", ("target", "host"),
       ("cooldown_end", "end of cooldown, run seconds (null: for good)"),
       ("kill", "its processes are killed")),
    _k("hvd_lock_held", HVD, "a driver lock held a second or more", ("lock", "lock"),
       ("owner", "holder"), ("held_s", "seconds")),
    _k("hvd_stop", HVD, "the driver stops the job", ("error", "error or null")),
    _k("hvd_abort", HVD, "a worker aborts (exit 134)", ("error", "error")),
    _k("hvd_reinit_failed", HVD, "a worker's re-initialisation failed and it resets again "
       "(knob reinit_error: reset; upstream aborts)", ("error", "error")),
    _k("hvd_exit", HVD, "a worker exits with an error", ("error", "error"),
       ("code", "exit code")),
    _k("hvd_exit_ignored", HVD, "the driver ignores a worker's exit", ("slot", "host:local"),
       ("code", "exit code")),
    _k("hvd_scheduled_exit", HVD, "a worker exits as the scenario's exit_schedule says "
       "(a failure the scenario injects)", ("mode", "exit mode"), ("epoch", ""),
       ("batch", ""), ("start_rank", "")),
    _k("hvd_job_succeeded", HVD, "the driver saw every worker succeed",
       ("results", "results collected")),
    _k("hvd_resume_failed", HVD, "resuming after a reset failed", ("error", "error")),
    _k("hvd_rank_and_size_error", HVD, "a worker's rank-and-size request failed",
       ("slot", "host:local"), ("error", "error")),
    _k("hvd_spawner_error", HVD, "spawning a worker failed", ("slot", "host:local"),
       ("error", "error")),
    _k("hvd_ssh_failed", HVD, "the driver's connection to a task service failed",
       ("to", "host"), ("error", "error")),
    _k("reset_callback", HVD, "a user reset callback ran (after the reset, before the next "
       "sync) and read the state", ("round", "rendezvous id"), ("rank", "its new rank"),
       ("size", "the new world size"), ("epoch", "the epoch it read"),
       ("step", "the model's step it read"), ("digest", "the model's digest it read")),
    _k("hvd_launcher_gone", HVD, "the driver's host came back after a crash: horovodrun died "
       "with it and is not started again", ("incarnation", "the host's first process's "
                                            "incarnation (1, 2, ...)")),
)
"""Every event kind, in the order a run usually records them."""

BY_KIND: dict[str, EventKind] = {k.kind: k for k in EVENT_KINDS}


def field_names(kind: EventKind) -> list[str]:
    """The kind's field names, without the optional marker."""
    return [name.rstrip("?") for name, _ in kind.fields]


PROTOCOL_SOURCES = (TE, HVD, STATIC)
"""The sources of kinds that one protocol records in its own dialect."""
SHARED_KINDS: tuple[str, ...] = tuple(k.kind for k in EVENT_KINDS
                                      if k.source not in PROTOCOL_SOURCES and k.kind != STRETCH)
"""Recorded kinds that mean the same in every protocol's trace (the tool's, the runtime's,
the fault injector's, and those every protocol records alike): neutral as recorded. The
fast fidelity's summaries are not among them: a history reads them as their steps."""

NEUTRAL = "protocol vocabularies"
TRANSLATED_KINDS: tuple[EventKind, ...] = (
    _k("epoch_decided", NEUTRAL, "one participant's write decided an epoch's membership, at "
       "this instant, among participants that had joined (its members learn it with "
       "rdzv_done)", ("round", "epoch id"), ("members?", "[member...] in rank order")),
    _k("epoch_assigned", NEUTRAL, "a coordinator assigned the ranks of a new epoch's world: "
       "the job's world where the protocol has such a coordinator (each member's rdzv_done "
       "shows its part), planned before its members run",
       ("round", "epoch id"), ("ranks", "{member: rank}"),
       ("resets", "epochs before it that reset the job (null: unknown)")),
    _k("restart", NEUTRAL, "a host's agent restarts its workers",
       ("failure", "a worker failure caused it"),
       ("spent", "it spends restart budget (a membership change does not)"),
       ("left", "restarts left after it (null: unknown)")),
    _k("restarts_left", NEUTRAL, "a host's restart budget, as its agent now has it",
       ("left", "restarts left")),
    _k("restart_count", NEUTRAL, "the restart count a host's agent told its workers of an "
       "epoch", ("round", "epoch id"), ("count", "restarts before it")),
    _k("barrier_enter", NEUTRAL, "a party enters a barrier of an epoch (the one that ends "
       "its job, a coordinator's reset barrier): no party leaves it before every party of "
       "the epoch arrived",
       ("round", "epoch id"), ("party", "who entered (its host)"),
       ("parties", "how many distinct parties it waits for (null: unknown)")),
    _k("barrier_trip", NEUTRAL, "the barrier let this party go (or, where a coordinator "
       "keeps it, tripped)", ("round", "epoch id"),
       ("entered?", "[party...]: the distinct parties it counted when it tripped, where its "
        "keeper records them (else each party's barrier_enter shows it); it waits for the "
        "epoch's world")),
    _k("barrier_fail", NEUTRAL, "the barrier failed for this party", ("error", "error")),
    _k("rendezvous_closed", NEUTRAL, "a host closed the rendezvous for every host"),
    _k("rendezvous_close_failed", NEUTRAL, "closing the rendezvous failed",
       ("error", "error")),
    _k("offered", NEUTRAL, "the hosts the discovery offers the job from now on",
       ("hosts", "[host...]")),
    _k("evict", NEUTRAL, "a host is shut out of the job (blacklisted)", ("host", "host"),
       ("until", "end of its cooldown, run seconds (null: for good)")),
    _k("injected_failure", NEUTRAL, "a worker fails as the scenario scripts it: a failure "
       "injected through the protocol's own hooks"),
    _k("worker_error", NEUTRAL, "a worker exits with an error", ("error", "error")),
    _k("abort", NEUTRAL, "a worker aborts", ("error", "error")),
    _k("reset_hook", NEUTRAL, "a user callback the protocol runs when the world changed "
       "(after the reset, before the next state sync) read the state",
       ("round", "epoch id"), ("rank", "its new rank"), ("size", "the new world size"),
       ("epoch", "the training epoch it read"), ("step", "the model's step it read"),
       ("digest", "the model's digest it read")),
)
"""What the protocols' own events are read as: each protocol maps its kinds onto these in
its vocabulary module (``elastic_sim.protocols.<name>.vocabulary``)."""

NEUTRAL_KINDS: tuple[str, ...] = SHARED_KINDS + tuple(k.kind for k in TRANSLATED_KINDS)
"""Every kind a check may read: the shared recorded kinds and the translated ones."""

TRANSLATED_BY_KIND: dict[str, EventKind] = {k.kind: k for k in TRANSLATED_KINDS}
