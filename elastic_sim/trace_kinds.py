"""Every kind of trace event and its fields, defined once: what the runtimes and protocols
record, what the checks, metrics and reports read. ``python -m elastic_sim.tracedoc``
writes the table to docs/trace-events.md; a test keeps both in step with the code (every
``record(kind, ...)`` call uses a kind and fields listed here)."""

from __future__ import annotations

from dataclasses import dataclass


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
API, TE, HVD, STATIC = ("protocols/api", "torchelastic", "horovod", "static")
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
       ("restart_count?", "TORCHELASTIC_RESTART_COUNT it was told (a torchrun worker's)")),
    _k("proc_exit", RUNTIME, "a process ends", ("code", "exit code (negative: signal)"),
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
       ("seq", "sequence number"), ("op", "operation"), ("nbytes", "payload bytes")),
    _k("coll_done", API, "the collective completed for this member", ("group", "name"),
       ("seq", "sequence number"), ("op", "operation")),
    _k("coll_fail", API, "the collective failed or timed out for this member",
       ("group", "name"), ("seq", "sequence number"), ("op", "operation"), ("error", "error"),
       ("peer?", "the group rank whose death failed the call, where the runtime knows it "
        "(the sim)")),
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
       ("step", "step number")),
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
)
"""Every event kind, in the order a run usually records them."""

BY_KIND: dict[str, EventKind] = {k.kind: k for k in EVENT_KINDS}


def field_names(kind: EventKind) -> list[str]:
    """The kind's field names, without the optional marker."""
    return [name.rstrip("?") for name, _ in kind.fields]
