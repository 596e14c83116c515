"""The coordinator's fault targets: each fault the injector fires at a host becomes a
command to the node that runs the host, which carries it out on its own processes
(:meth:`elastic_sim.real.cluster.node.NodeControl.command`, with the one implementation of
the targets on a machine, :class:`elastic_sim.real.faults.targets.HostTargets`).

A cut is planned here, over the whole world: every node involved is told the addresses it
must stop sending to and receiving from (:mod:`.nodecut`); hosts that share an address
(one machine) cannot be cut apart, and such a cut is refused. Link faults, connection
resets and start-up faults are not forwarded yet: refused when due, saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from elastic_sim.faults.model import ConnReset, LinkFault, OneWayPartition, Partition, PowerOff
from elastic_sim.real.cluster import wire
from elastic_sim.real.faults.targets import Cut, Healed, StartFault

if TYPE_CHECKING:  # the coordinator builds its targets from its nodes
    from elastic_sim.real.cluster.coordinator import Node

Ask = Callable[["Node", wire.Message], wire.Message]
"""Send a node a command and wait for its answer (``ok``, and ``why`` when not)."""

_NO_SHAPING = "cluster mode does not forward link faults (tc netem) to its nodes yet"


def _blocks(fault: Partition | OneWayPartition | PowerOff, a: str, b: str) -> bool:
    """Whether ``fault`` drops packets from host ``a`` to host ``b``."""
    if isinstance(fault, OneWayPartition):
        return a in fault.src and b in fault.dst
    if isinstance(fault, PowerOff):  # its host cut from all others, for good
        return a != b and fault.host in (a, b)
    return fault.cut(a, b) or fault.cut(b, a)


def _why(answer: wire.Message) -> str:
    return "" if answer.get("ok") else str(answer.get("why", "refused"))


class ForwardedTargets:
    """The fault targets of a cluster run, forwarded to the nodes (see the module
    docstring)."""

    def __init__(self, hosts: Sequence[str], owner: Mapping[str, Node], ask: Ask) -> None:
        self.hosts = tuple(hosts)
        self.owner = owner
        """Host name -> the node that runs it."""
        self._ask = ask

    def signal_host(self, host: str, sig: int) -> bool:
        """Signal every process of ``host`` on its node; False if none is left."""
        return bool(self._ask(self.owner[host], {"do": "signal_host", "host": host,
                                                 "sig": sig}).get("ok"))

    def signal_proc(self, name: str, sig: int) -> str:
        """Signal process ``name`` on its host's node; "" if done, else why not."""
        node = self.owner.get(name.partition("/")[0])
        if node is None:
            return f"process {name}: no such host"
        return _why(self._ask(node, {"do": "signal_proc", "name": name, "sig": sig}))

    def signal_role(self, host: str, to: str, sig: int) -> str:
        """Signal ``host``'s first process (``to`` "agent") or its workers on its node;
        "" if done, else why not."""
        node = self.owner.get(host)
        if node is None:
            return f"no host {host}"
        return _why(self._ask(node, {"do": "signal_role", "host": host, "to": to, "sig": sig}))

    def start_fault(self, fault: StartFault) -> str:
        """Start-up faults are not forwarded to the nodes yet."""
        return "cluster mode does not forward start-up faults to its nodes yet"

    def cut(self, fault: Cut) -> str:
        """Have every node involved drop the packets ``fault`` cuts; "" if done."""
        if isinstance(fault, LinkFault):
            return _NO_SHAPING
        return self._cut(fault, "cut")

    def heal(self, fault: Healed) -> str:
        """Have them stop dropping."""
        if isinstance(fault, LinkFault):
            return _NO_SHAPING
        return self._cut(fault, "heal")

    def reset(self, fault: ConnReset) -> tuple[str, int]:
        """Connection resets are not forwarded to the nodes yet."""
        return "cluster mode does not forward connection resets to its nodes yet", 0

    def _cut(self, fault: Partition | OneWayPartition | PowerOff, op: str) -> str:
        names = self.hosts
        addr = {h: self.owner[h].address for h in names}
        plan: dict[int, tuple[set[str], set[str]]] = {}
        nodes: dict[int, Node] = {}
        for a in names:
            for b in names:
                if a == b or not (_blocks(fault, a, b) or _blocks(fault, b, a)):
                    continue
                if addr[a] == addr[b]:
                    return (f"hosts {a} and {b} share the address {addr[a]} (one machine): "
                            "they cannot be cut apart; use --launcher netns or separate "
                            "machines")
                node = self.owner[a]
                nodes[node.index] = node
                out, in_ = plan.setdefault(node.index, (set(), set()))
                if _blocks(fault, a, b):
                    out.add(addr[b])
                if _blocks(fault, b, a):
                    in_.add(addr[b])
        whys = []
        for index, (out, in_) in sorted(plan.items()):
            answer = self._ask(nodes[index], {"do": op, "fault": fault.id,
                                              "out": sorted(out), "in": sorted(in_)})
            if not answer.get("ok"):
                whys.append(f"node {index}: {answer.get('why')}")
        return "; ".join(whys)
