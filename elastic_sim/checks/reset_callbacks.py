"""Reset callbacks act on the state the job goes on with.

A protocol that runs user callbacks at a reset records what each read (read as
``reset_hook``: the model's step and digest). When a state sync follows on that process
before its next callback (``sync``), the state it brings is what training continues from:
a callback that read something else (its own restored state, say) acted on stale state.
A callback that no sync follows (a reset that skipped the sync) is not judged.
Self-contained: reads only those two event kinds.
"""

from __future__ import annotations

from collections.abc import Sequence

from elastic_sim.checks.verdict import CheckResult, Violation
from elastic_sim.history import neutral
from elastic_sim.trace import TraceEvent


def reset_callback_state(events: Sequence[TraceEvent]) -> CheckResult:
    """A reset callback reads the state its process trains on next: what it read (step,
    digest) equals what the sync that follows it on that process brings (Horovod runs
    callbacks before the sync, so they read the rank's own state); a callback no sync
    follows is not judged."""
    res = CheckResult("reset_callback_state",
                      "reset callbacks read the state the sync that follows brings",
                      unit="callbacks")
    open_calls: dict[str, TraceEvent] = {}
    for ev in neutral(events).of("reset_hook", "sync"):
        if ev.kind == "reset_hook":
            open_calls[ev.proc] = ev  # an earlier one no sync followed is not judged
        elif ev.kind == "sync" and ev.proc in open_calls:
            cb = open_calls.pop(ev.proc)
            res.checked += 1
            if (cb.get("step"), cb.get("digest")) != (ev.get("step"), ev.get("digest")):
                res.violations.append(Violation(
                    f"{cb.proc}'s reset callback read step {cb.get('step')} (epoch "
                    f"{cb.get('epoch')}), but the sync that followed brought step "
                    f"{ev.get('step')} from {ev.get('root')}", [cb, ev]))
    return res
