"""Link faults for real: ``tc netem`` on the loopback of a run's network namespace.

A run's hosts share one loopback (:mod:`.netns`), each at its own address, and every
connection carries the mark of the host that opened it. A link fault between hosts ``a``
and ``b`` gets a class of its own under an HTB root qdisc on ``lo``, with a ``netem``
qdisc as its leaf holding the fault's delay, jitter, loss, duplication and reordering; an
nftables rule in the namespace's output chain sets the priority of every packet of the
connections between ``a`` and ``b`` (either end may have opened them, both directions) to
that class, which HTB reads directly (no ``fw`` classifier needed). Every other packet
leaves unshaped. At the heal the rules go and the netem leaf is set to no impairment (so
what it still holds drains instead of being dropped); the classes go with the namespace.

The kernel must have the ``htb`` and ``netem`` qdiscs: :func:`missing` probes for them
once, in a throwaway namespace, and says what is lacking.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from elastic_sim.faults.model import LinkFault

ROOT = "1:"
"""Handle of the HTB root qdisc on a namespace's ``lo``."""

FIRST_CLASS = 0x10
"""Minor number of the first link fault's class (``1:10``); each next one adds one."""


@dataclass(frozen=True)
class Steer:
    """Send the packets of connections that host mark ``origin`` opened to ``dest``
    (both directions) through class ``1:minor``."""

    origin: int
    dest: str
    minor: int

    def rule(self) -> str:
        """This steering as an nftables rule body (in the output hook)."""
        return f"ct mark {self.origin} ct original ip daddr {self.dest} " \
            f"meta priority set 1:{self.minor:x}"


def steers(fault: LinkFault, hosts: Sequence[str], addresses: Sequence[str],
           minor: int) -> list[Steer]:
    """The steering rules that put the traffic ``fault`` applies to through ``1:minor``
    (never a host's traffic with itself); ``addresses[i]`` is ``hosts[i]``'s address."""
    return [Steer(i + 1, addresses[j], minor)
            for i, a in enumerate(hosts) for j, b in enumerate(hosts)
            if a != b and fault.applies(a, b)]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}ms"


def netem_args(fault: LinkFault) -> list[str]:
    """The ``netem`` parameters of ``fault``: ``delay`` plus up to ``reorder`` more
    (uniform jitter around the middle, so packets overtake each other), ``loss`` and
    ``duplicate`` per packet."""
    jitter = fault.reorder / 2
    args = ["delay", _ms(fault.delay + jitter)]
    if jitter > 0:
        args.append(_ms(jitter))
    if fault.loss > 0:
        args += ["loss", f"{fault.loss * 100:.4f}%"]
    if fault.duplicate > 0:
        args += ["duplicate", f"{fault.duplicate * 100:.4f}%"]
    return args


CLEAR = ["delay", "0ms"]
"""The netem parameters of a healed class: no impairment."""


def root_commands() -> list[list[str]]:
    """``tc`` argument lists that put the HTB root on ``lo`` (unclassified packets pass
    directly, unshaped)."""
    return [["qdisc", "add", "dev", "lo", "root", "handle", ROOT, "htb"]]


def class_commands(minor: int, fault: LinkFault) -> list[list[str]]:
    """``tc`` argument lists that add class ``1:minor`` with ``fault``'s netem leaf."""
    cls = f"1:{minor:x}"
    return [
        ["class", "add", "dev", "lo", "parent", ROOT, "classid", cls, "htb",
         "rate", "100gbit", "quantum", "60000"],
        ["qdisc", "add", "dev", "lo", "parent", cls, "handle", f"{minor:x}:", "netem",
         *netem_args(fault)],
    ]


def heal_commands(minor: int) -> list[list[str]]:
    """``tc`` argument lists that take the impairment off class ``1:minor``."""
    return [["qdisc", "change", "dev", "lo", "parent", f"1:{minor:x}", "handle",
             f"{minor:x}:", "netem", *CLEAR]]


def missing() -> str:
    """What this machine lacks for link faults ("" if nothing): root, ``ip``, ``nft`` and
    ``tc``, and a kernel with the ``htb`` and ``netem`` qdiscs (probed once per process, in
    a throwaway network namespace)."""
    from elastic_sim.real.faults import netns

    lacking = netns.missing()
    if lacking:
        return lacking
    if shutil.which("tc") is None:
        return "the 'tc' command (iproute2) is not installed"
    return _kernel_lacks()


@functools.cache
def _kernel_lacks() -> str:
    from elastic_sim.real.faults import netns

    name = f"{netns.Namespace.PREFIX}{os.getpid()}-probe"
    try:
        netns.sweep_stale()
        subprocess.run(["ip", "netns", "add", name], capture_output=True, check=True,
                       timeout=30)
        steps = [*root_commands(),
                 *class_commands(FIRST_CLASS, LinkFault(id="probe", at=0.0, delay=0.001,
                                                         duration=1.0))]
        for argv, qdisc in zip(steps, ("htb", "htb", "netem"), strict=True):
            done = subprocess.run(["ip", "netns", "exec", name, "tc", *argv],
                                  capture_output=True, check=False, timeout=30)
            if done.returncode != 0:
                err = done.stderr.decode(errors="replace").strip().splitlines()
                said = err[0].removeprefix("Error: ").rstrip(".") if err else "failed"
                return (f"this kernel cannot add a {qdisc!r} qdisc (tc: {said}; it needs "
                        f"CONFIG_NET_SCH_{qdisc.upper()})")
    except (OSError, subprocess.SubprocessError) as exc:
        return f"probing for tc netem failed: {exc}"
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False,
                       timeout=30)
    return ""
