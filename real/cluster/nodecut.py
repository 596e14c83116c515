"""A network cut made on one node: packets to and from other nodes' addresses dropped by an
nftables table of this node's network stack (its own namespace under ``--launcher
netns``, the machine's otherwise, which needs root).

The coordinator sends, per cut, the addresses this node must stop sending to (``out``) and
receiving from (``in``); both ends of a cut drop, so it holds even if one end's command is
late. Dropped, not refused: connections stall as under a real cut. The table is rebuilt
whole on every change and deleted when the run ends.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess

TABLE = "elastic_sim_node"


def _valid(addr: str) -> bool:
    try:
        ipaddress.ip_address(addr)
        return True
    except ValueError:
        return False


class NodeCut:
    """The cuts in force on this node, by fault id."""

    def __init__(self, own: str) -> None:
        self.own = own
        self.active: dict[str, tuple[list[str], list[str]]] = {}
        self._installed = False

    def why_not(self) -> str:
        """Why this node cannot cut ("" if it can)."""
        if shutil.which("nft") is None:
            return "the node has no 'nft' command"
        return ""

    def apply(self, fault_id: str, start: bool, out: list[str], in_: list[str]) -> str:
        """Start (or heal) cut ``fault_id``; "" if done, else why not."""
        bad = [a for a in out + in_ if not _valid(a)]
        if bad:
            return f"not IP addresses: {bad}"
        if self.own in out + in_:
            return (f"a host on this node ({self.own}) shares its address with a host it is "
                    "cut from: hosts on one machine cannot be cut apart (use --launcher netns)")
        if start:
            if not out and not in_:
                return ""
            why = self.why_not()
            if why:
                return why
            self.active[fault_id] = (sorted(set(out)), sorted(set(in_)))
        elif self.active.pop(fault_id, None) is None:
            return ""
        return self._load()

    def ruleset(self) -> str:
        """The table for the cuts in force."""
        outs = sorted({a for o, _ in self.active.values() for a in o})
        ins = sorted({a for _, i in self.active.values() for a in i})

        def rules(field: str, addrs: list[str]) -> str:
            return "".join(f"    {'ip6' if ':' in a else 'ip'} {field} {a} drop\n" for a in addrs)

        return (
            f"table inet {TABLE} {{\n"
            "  chain out {\n    type filter hook output priority 0; policy accept;\n"
            f"{rules('daddr', outs)}  }}\n"
            "  chain in {\n    type filter hook input priority 0; policy accept;\n"
            f"{rules('saddr', ins)}  }}\n}}\n"
        )

    def _load(self) -> str:
        text = f"table inet {TABLE}\ndelete table inet {TABLE}\n"
        if self.active:
            text += self.ruleset()
        done = subprocess.run(["nft", "-f", "-"], input=text.encode(), capture_output=True,
                              timeout=30, check=False)
        if done.returncode != 0:
            return f"nft: {done.stderr.decode(errors='replace').strip()}"
        self._installed = bool(self.active)
        return ""

    def clear(self) -> None:
        """Remove every cut (the end of the run)."""
        if self._installed:
            self.active.clear()
            self._load()
