"""Deliberately broken variants of the static protocol, for the search to find."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from elastic_sim.protocols.api import Runtime
from elastic_sim.protocols.static.main import Member, run_host


class NoRollbackMember(Member):
    """BROKEN: after a failed collective it claims to restore but keeps its uncommitted
    steps. Harmless without faults; a failure between two commits shows it."""

    def restore(self, reason: str) -> None:
        self.rt.record("restore", step=self.state.step, digest=self.state.digest(),
                       reason=reason)


async def no_rollback_main(rt: Runtime, args: Mapping[str, Any]) -> int:
    """The static host process with :class:`NoRollbackMember`."""
    return await run_host(rt, args, NoRollbackMember)
