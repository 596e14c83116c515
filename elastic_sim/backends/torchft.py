"""``--mode torchft``: a torchft scenario run by upstream's own torchft 0.2.0 (its
Lighthouse, Manager, ProcessGroupGloo and HTTP checkpoint transport) on real mode's
processes and faults (:mod:`elastic_sim.real.torchft`)."""

from __future__ import annotations

import dataclasses
import importlib.util
from typing import TYPE_CHECKING, ClassVar

from elastic_sim.backends.base import Refused
from elastic_sim.backends.real import RealBackend, free_port
from elastic_sim.world import World

if TYPE_CHECKING:
    from collections.abc import Sequence

    from elastic_sim.scenario import Scenario
    from elastic_sim.spec import RunSpec
    from elastic_sim.trace import TraceEvent


class TorchftBackend(RealBackend):
    """Upstream's torchft on real processes: every host runs real mode's process, whose
    entry is upstream's Lighthouse or a replica group's launcher of ranks training on
    ``torchft.Manager``; faults through real mode's injector."""

    name: ClassVar[str] = "torchft"
    summary: ClassVar[str] = "upstream's torchft 0.2.0 (torchft scenarios)"
    realism: ClassVar[int] = 2
    launchers: ClassVar[tuple[str, ...]] = ("local",)
    runs_protocols: ClassVar[bool] = False

    def rules(self, spec: RunSpec) -> Refused | None:
        """A torchft scenario without broken variants, on CPUs, with torchft installed;
        and real mode's rules."""
        from elastic_sim.real.torchft import TORCHFT_INSTALL, refusal

        bad = refusal(spec.scenario.protocol.label, spec.scenario.knobs())
        if bad is not None:
            return Refused(spec.file, bad[0], f"{bad[1]}; run with --mode sim")
        if spec.scenario.cluster.device != "cpu":
            return Refused(spec.file, "cluster.device", "--mode torchft trains on CPUs "
                           "(ProcessGroupGloo); run with --mode sim")
        if importlib.util.find_spec("torchft") is None:
            return Refused("--mode torchft", "", "torchft mode runs upstream's torchft, which "
                           f"is not installed: {TORCHFT_INSTALL}")
        return super().rules(spec)

    def world(self, sc: Scenario, seed: int) -> World:
        """Real mode's world, every host running upstream's entry; the replica groups'
        stores and the Lighthouse on ports free here now."""
        from elastic_sim.real.torchft import HOST_ENTRY

        w = super().world(sc, seed)
        knobs = {**w.args["knobs"], "store_port": 0}
        return dataclasses.replace(w, entry=HOST_ENTRY, args={
            **w.args, "knobs": knobs, "lighthouse_port": free_port()})

    def not_judged(self, spec: RunSpec, events: Sequence[TraceEvent]) -> dict[str, str]:
        """What upstream's events cannot show."""
        from elastic_sim.real.torchft import NOT_JUDGED

        return dict(NOT_JUDGED)
