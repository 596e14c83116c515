"""Deliberately broken variants of the static protocol, for the search to find."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocols.api import Runtime, StoreConnectionError
from protocols.static.main import Member, _settings
from protocols.static.settings import StaticKnobs, Workload


class NoRollbackMember(Member):
    """BROKEN: after a failed collective it claims to restore but keeps its uncommitted
    steps. Harmless without faults; a failure between two commits shows it."""

    def restore(self, reason: str) -> None:
        self.rt.record("restore", step=self.state.step, digest=self.state.digest(),
                       reason=reason)


async def no_rollback_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """The static host process with :class:`NoRollbackMember`."""
    knobs: StaticKnobs = _settings(StaticKnobs, args.get("knobs", {}))
    work: Workload = _settings(Workload, args.get("workload", {}))
    store_host = str(args["store_host"])
    if rt.host == store_host:
        await rt.host_store(knobs.store_port)
    try:
        store = await rt.connect_store(f"{store_host}:{knobs.store_port}", knobs.store_timeout)
    except StoreConnectionError as exc:
        rt.record("job_failed", error=f"store unreachable: {exc}")
        return 1
    member = NoRollbackMember(rt, store, knobs, work, int(args.get("seed", 0)))
    return await member.run(is_store_host=rt.host == store_host)
