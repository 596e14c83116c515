"""Connection resets for real: established TCP connections between two hosts of a run's
network namespace reset at once, while new ones can still be opened.

The namespace's conntrack table (``/proc/net/nf_conntrack``) lists every connection with
the mark of the host that opened it (:mod:`.netns`) and its original addresses. The
connections between the fault's hosts are found there, and the accepting end's socket of
each is destroyed with ``ss -K`` (the kernel's ``SOCK_DESTROY``): the kernel aborts it
(that end's next call fails with ECONNABORTED) and sends a TCP RST to the opening end,
which sees ECONNRESET, as when a peer or a middlebox resets a connection. Nothing is
dropped or refused afterwards: a new connection is accepted as before. Idle connections
are reset as well as busy ones, since no packet has to cross for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elastic_sim.faults.model import ConnReset

BATCH = 32
"""Connections per ``ss -K`` command (its filter grows with each)."""


@dataclass(frozen=True)
class Conn:
    """One established TCP connection of the conntrack table, by its original direction
    (``src`` opened it to ``dst``) and the mark of the host that opened it."""

    src: str
    sport: int
    dst: str
    dport: int
    mark: int


def parse_conntrack(text: str) -> list[Conn]:
    """The established TCP connections in ``/proc/net/nf_conntrack``'s text."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 6 or words[2] != "tcp" or "ESTABLISHED" not in words:
            continue
        fields: dict[str, str] = {}
        for word in words:
            key, eq, value = word.partition("=")
            if eq and key not in fields:  # the first src/dst/sport/dport: original direction
                fields[key] = value
        try:
            out.append(Conn(fields["src"], int(fields["sport"]), fields["dst"],
                            int(fields["dport"]), int(fields.get("mark", "0"))))
        except (KeyError, ValueError):
            continue
    return out


def between(fault: ConnReset, conns: Sequence[Conn], hosts: Sequence[str],
            addresses: Sequence[str]) -> list[Conn]:
    """The connections ``fault`` resets: opened by host mark ``i + 1`` (``hosts[i]``) to
    another host's address ``addresses[j]``, where the fault applies to the pair."""
    host_at = {addr: h for addr, h in zip(addresses, hosts, strict=True)}
    out = []
    for c in conns:
        if not 1 <= c.mark <= len(hosts) or c.dst not in host_at:
            continue  # not a run host's connection (or not to a host's address)
        opener, peer = hosts[c.mark - 1], host_at[c.dst]
        if opener != peer and fault.applies(opener, peer):
            out.append(c)
    return out


def kill_filters(conns: Sequence[Conn]) -> list[str]:
    """``ss`` filters selecting the accepting end's socket of each of ``conns`` (in
    batches of :data:`BATCH`)."""
    out = []
    for i in range(0, len(conns), BATCH):
        out.append(" or ".join(f"( src {c.dst}:{c.dport} and dst {c.src}:{c.sport} )"
                               for c in conns[i:i + BATCH]))
    return out
