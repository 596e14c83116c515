"""The network: a networkx graph of hosts and links, path costs, and partitions.

- ``star``: every host is linked to one switch node named :data:`SWITCH`.
- ``full``: every pair of hosts is linked. The mesh is implicit (thousands of hosts would
  make millions of edges); only the links named in ``world.links`` are materialised.

``world.links`` override the latency and bandwidth of a named edge (or add it). A path's
latency is the sum over the shortest-latency path, its bandwidth the minimum on that path;
paths are computed lazily and cached per host pair. Two processes on the same host talk
over loopback: no latency, the world's default bandwidth.

Partitions are a set of active cuts: ``reachable(a, b)`` is False while any active
:class:`~elastic_sim.faults.model.Partition` separates ``a`` and ``b``, or a one-way cut drops
packets from ``a`` to ``b``. Connection-based traffic (the store, collectives) needs both directions
(:meth:`Network.connected`). Link faults add delay to every path they cross, and lose,
duplicate and reorder messages (:meth:`Network.transmit`), drawing from ``rng``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence

import networkx as nx

from elastic_sim.faults.model import LinkFault, Partition
from elastic_sim.world import World

SWITCH = "switch"
"""The name of the star topology's switch node (usable in ``world.links``)."""

_OTHER = "\x00any-other-host"  # stands for every host of a full mesh without overrides

Path = tuple[float, float]
"""(latency seconds, bandwidth bytes/s)."""


class Network:
    """Latency, bandwidth and reachability between hosts."""

    def __init__(self, world: World) -> None:
        self.hosts: tuple[str, ...] = world.host_names
        self._host_set = frozenset(self.hosts)
        self.latency_default = world.latency
        self.bandwidth_default = world.bandwidth
        self.topology = world.topology
        self.graph = nx.Graph()
        self.graph.add_nodes_from(self.hosts)
        self._cache: dict[tuple[str, str], Path] = {}
        self._cuts: dict[int, dict[str, int]] = {}
        self._one_way: dict[int, tuple[frozenset[str], frozenset[str]]] = {}
        self._links: dict[int, LinkFault] = {}
        self._next_cut = 0
        self.rng = random.Random(0)
        """Draws of link faults (loss, duplication, reordering); the run seeds it."""
        if world.topology == "star":
            if SWITCH in self._host_set:
                raise ValueError(f"a host may not be named {SWITCH!r} in a star topology")
            for h in self.hosts:
                self.graph.add_edge(h, SWITCH, latency=world.latency, bandwidth=world.bandwidth)
        elif world.topology != "full":
            raise ValueError(f"unknown topology {world.topology!r}: expected 'star' or 'full'")
        for link in world.links:
            if link.latency < 0 or link.bandwidth <= 0:
                raise ValueError(f"link {link.a}-{link.b}: bad latency or bandwidth")
            self.graph.add_edge(link.a, link.b, latency=link.latency, bandwidth=link.bandwidth)
        # Fast paths: a plain star (a tree through the switch), a full mesh without links.
        self._star_tree = world.topology == "star" and all(
            SWITCH in (a, b) and (a in self._host_set or b in self._host_set)
            for a, b in self.graph.edges
        )
        self._plain_full = world.topology == "full" and not world.links
        self._uplink: dict[str, Path] = {}
        if self._star_tree:
            for h in self.hosts:
                e = self.graph.adj[h][SWITCH]
                self._uplink[h] = (e["latency"], e["bandwidth"])
        if world.topology == "full" and world.links:
            self._base = self._full_base()

    # -- paths -------------------------------------------------------------------------

    def path(self, a: str, b: str) -> Path:
        """(latency, bandwidth) of the shortest-latency path from host ``a`` to host ``b``,
        with the delay of active link faults."""
        if self._links and a != b:
            lat, bw = self._base_path(a, b)
            return (lat + self.extra_delay(a, b), bw)
        return self._base_path(a, b)

    def _base_path(self, a: str, b: str) -> Path:
        if a == b:
            return (0.0, self.bandwidth_default)
        if self._star_tree:
            la, ba = self._uplink[a]
            lb, bb = self._uplink[b]
            return (la + lb, ba if ba < bb else bb)
        if self._plain_full:
            return (self.latency_default, self.bandwidth_default)
        key = (a, b) if a < b else (b, a)
        got = self._cache.get(key)
        if got is None:
            got = self._compute(key[0], key[1])
            self._cache[key] = got
        return got

    def latency(self, a: str, b: str) -> float:
        """One-way latency from host ``a`` to host ``b``."""
        return self.path(a, b)[0]

    def group_path(self, hosts: Iterable[str]) -> Path:
        """Max path latency and min path bandwidth between any two of ``hosts``."""
        distinct = list(dict.fromkeys(hosts))
        if len(distinct) < 2:
            return (0.0, self.bandwidth_default)
        if self._links:
            lat, bw = self._group_base(distinct)
            extra = max(self.extra_delay(a, b) for a, b in itertools.combinations(distinct, 2))
            return (lat + extra, bw)
        return self._group_base(distinct)

    def _group_base(self, distinct: list[str]) -> Path:
        if self._star_tree:
            ups = [self._uplink[h] for h in distinct]
            lats = sorted((u[0] for u in ups), reverse=True)
            return (lats[0] + lats[1], min(u[1] for u in ups))
        if self._plain_full:
            return (self.latency_default, self.bandwidth_default)
        lat, bw = 0.0, float("inf")
        for a, b in itertools.combinations(distinct, 2):
            pl, pb = self.path(a, b)
            lat = max(lat, pl)
            bw = min(bw, pb)
        return (lat, bw)

    def _compute(self, a: str, b: str) -> Path:
        graph = self.graph if self.topology == "star" else self._full_graph(a, b)
        try:
            _, nodes = nx.bidirectional_dijkstra(graph, a, b, weight="latency")
        except nx.NetworkXNoPath:
            return (float("inf"), 0.0)
        lat, bw = 0.0, float("inf")
        for u, v in itertools.pairwise(nodes):
            e = graph.adj[u][v]
            lat += e["latency"]
            bw = min(bw, e["bandwidth"])
        return (lat, bw)

    def _full_base(self) -> nx.Graph:
        """The part of a full mesh that matters for shortest paths: the named links, the
        default edges between hosts they touch, and one stand-in for every other host
        (a detour through an untouched host costs two default hops, whichever it is)."""
        base = nx.Graph()
        special = sorted(n for n in self.graph.nodes if self.graph.degree(n) > 0)
        base.add_nodes_from(special)
        special_hosts = [n for n in special if n in self._host_set]
        self._add_defaults(base, special_hosts)
        if len(special_hosts) < len(self.hosts):
            for h in special_hosts:
                self._add_default(base, h, _OTHER)
        base.add_edges_from(self.graph.edges(data=True))
        return base

    def _full_graph(self, a: str, b: str) -> nx.Graph:
        g = self._base.copy()
        extra = [h for h in (a, b) if h not in g]
        hosts_in = [n for n in g.nodes if n in self._host_set or n == _OTHER]
        for h in extra:
            for other in hosts_in:
                self._add_default(g, h, other)
            hosts_in.append(h)
        return g

    def _add_defaults(self, g: nx.Graph, hosts: Sequence[str]) -> None:
        for u, v in itertools.combinations(hosts, 2):
            self._add_default(g, u, v)

    def _add_default(self, g: nx.Graph, u: str, v: str) -> None:
        if not g.has_edge(u, v):
            g.add_edge(u, v, latency=self.latency_default, bandwidth=self.bandwidth_default)

    # -- partitions --------------------------------------------------------------------

    def add_cut(self, partition: Partition) -> int:
        """Start a partition; returns a token for :meth:`remove_cut`."""
        index: dict[str, int] = {}
        for i, group in enumerate(partition.groups):
            for h in group:
                index.setdefault(h, i)
        token = self._next_cut
        self._next_cut += 1
        self._cuts[token] = index
        return token

    def remove_cut(self, token: int) -> None:
        """Heal the partition, one-way cut or link fault started with ``token``."""
        self._cuts.pop(token, None)
        self._one_way.pop(token, None)
        self._links.pop(token, None)

    def add_one_way(self, src: Iterable[str], dst: Iterable[str]) -> int:
        """Start dropping packets from ``src`` hosts to ``dst`` hosts; a token to remove it."""
        token = self._next_cut
        self._next_cut += 1
        self._one_way[token] = (frozenset(src), frozenset(dst))
        return token

    def add_link_fault(self, fault: LinkFault) -> int:
        """Start a link fault; a token for :meth:`remove_cut`."""
        token = self._next_cut
        self._next_cut += 1
        self._links[token] = fault
        return token

    def extra_delay(self, a: str, b: str) -> float:
        """Delay the active link faults add between ``a`` and ``b``."""
        return sum(f.delay for f in self._links.values() if f.applies(a, b))

    def transmit(self, a: str, b: str) -> list[float]:
        """Delays after which copies of a message from ``a`` reach ``b``: none if it is
        lost or cut off, one normally, two if duplicated."""
        if a != b and not self.reachable(a, b):
            return []
        lat = self.path(a, b)[0]
        if not self._links or a == b:
            return [lat]
        out = [lat]
        for f in self._links.values():
            if not f.applies(a, b):
                continue
            if f.loss and self.rng.random() < f.loss:
                return []
            if f.duplicate and self.rng.random() < f.duplicate:
                out.append(out[0])
            if f.reorder:
                out = [d + self.rng.uniform(0.0, f.reorder) for d in out]
        return out

    def connected(self, a: str, b: str) -> bool:
        """Whether a connection between ``a`` and ``b`` works (both directions)."""
        return self.reachable(a, b) and (not self._one_way or self.reachable(b, a))

    def reachable(self, a: str, b: str) -> bool:
        """Whether packets from host ``a`` reach host ``b`` now (no active cut)."""
        if a == b:
            return True
        if self._one_way:
            for src, dst in self._one_way.values():
                if a in src and b in dst:
                    return False
        if not self._cuts:
            return True
        for index in self._cuts.values():
            ga = index.get(a)
            if ga is not None:
                gb = index.get(b)
                if gb is not None and gb != ga:
                    return False
        return True

    def all_reachable(self, hosts: Iterable[str]) -> bool:
        """Whether every pair of ``hosts`` can talk now (both directions)."""
        if not self._cuts and not self._one_way:
            return True
        hosts = list(hosts)
        if self._one_way:
            for src, dst in self._one_way.values():
                if any(h in src for h in hosts) and any(h in dst for h in hosts):
                    return False
        for index in self._cuts.values():
            seen: int | None = None
            for h in hosts:
                g = index.get(h)
                if g is not None:
                    if seen is None:
                        seen = g
                    elif g != seen:
                        return False
        return True
