"""The Lighthouse process (``torchft_lighthouse``): quorum requests and heartbeats from
the Manager servers come in, a quorum is looked for at each request and every
``quorum_tick``, and each waiting request is answered by the first quorum that includes
its replica (:mod:`.lighthouse_rules` decides).

It runs on the scenario's store host, as one process that can crash, freeze or be cut
off like any other; nothing restarts it unless a fault does (a new Lighthouse starts
from quorum id 0). The job's end stops it: once a replica group's launcher says its job
ended and no replica heartbeats any more (an operator tearing the job down; upstream's
Lighthouse is a service that runs until it is killed).
"""

from __future__ import annotations

from elastic_sim.protocols.api import Message, Runtime
from elastic_sim.protocols.torchft.knobs import TorchFTKnobs
from elastic_sim.protocols.torchft.lighthouse_rules import (
    LighthouseCore,
    LighthouseSettings,
    healthy,
)
from elastic_sim.protocols.torchft.quorum import Quorum, QuorumMember
from elastic_sim.protocols.torchft.rpc import Endpoint, address

LIGHTHOUSE_PORT = 29510
"""``torchft_lighthouse --bind`` default ``[::]:29510`` (src/lighthouse.rs)."""


def lighthouse_address(host: str) -> str:
    """Where the Lighthouse on ``host`` serves."""
    return address(f"{host}/main", LIGHTHOUSE_PORT)


def settings_of(knobs: TorchFTKnobs) -> LighthouseSettings:
    """The Lighthouse options the knobs set."""
    broken = {name for name in ("new_id_always", "no_split_brain_rule",
                                "heartbeats_never_expire") if getattr(knobs, f"broken_{name}")}
    return LighthouseSettings(knobs.min_replicas, knobs.join_timeout, knobs.quorum_tick,
                              knobs.heartbeat_timeout, frozenset(broken))


class Lighthouse:
    """The Lighthouse server: its core, its endpoint, and the job's end."""

    def __init__(self, rt: Runtime, knobs: TorchFTKnobs) -> None:
        self.rt = rt
        self.core = LighthouseCore(settings_of(knobs))
        self.ep = Endpoint(rt)
        self.ended = False
        for method, handler in (("lh_quorum", self._quorum), ("lh_heartbeat", self._heartbeat),
                                ("lh_connect", self._connect), ("lh_job_end", self._job_end)):
            self.ep.serve(LIGHTHOUSE_PORT, method, handler)

    def _quorum(self, msg: Message) -> None:
        member = QuorumMember.from_json(msg.body["member"])
        self._deliver(self.core.request(self.rt.monotonic(), member, msg, self.ep.deadline(msg)))

    def _heartbeat(self, msg: Message) -> None:
        self.core.heartbeat(self.rt.monotonic(), str(msg.body["replica_id"]))

    def _connect(self, msg: Message) -> None:
        self.ep.answer(msg, {})

    def _job_end(self, msg: Message) -> None:
        self.ended = True

    def _deliver(self, answers: list[tuple[object, Quorum]]) -> None:
        for tick in self.core.issued:
            q, d = tick.quorum, tick.decision
            assert q is not None
            self.rt.record("lh_quorum", quorum_id=q.quorum_id, rule=d.kind, bump=tick.bump,
                           members=[p.host for p in q.participants],
                           replica_ids=q.replica_ids, steps=[p.step for p in q.participants],
                           commit_failures=[p.commit_failures for p in q.participants],
                           participants=list(d.healthy_participants),
                           heartbeating=list(d.healthy_replicas))
        self.core.issued.clear()
        for token, quorum in answers:
            assert isinstance(token, Message)
            self.ep.answer(token, {"quorum": quorum.to_json()})

    def _done(self) -> bool:
        return self.ended and not healthy(self.rt.monotonic(), self.core.state,
                                          self.core.settings)

    async def serve(self) -> int:
        """Tick until the job has ended and no replica heartbeats; exit code 0."""
        tick = self.core.settings.quorum_tick
        while not self._done():
            await self.rt.poll(tick, lambda: not self.core.pending() and not self._done())
            self._deliver(self.core.tick(self.rt.monotonic()))
        return 0


async def lighthouse_main(rt: Runtime, knobs: TorchFTKnobs) -> int:
    """The Lighthouse host's process."""
    rt.record("lh_start", min_replicas=knobs.min_replicas, join_timeout=knobs.join_timeout,
              heartbeat_timeout=knobs.heartbeat_timeout)
    return await Lighthouse(rt, knobs).serve()
