"""What a quorum is made of (proto/torchft.proto ``QuorumMember``, ``Quorum``): plain data
the Lighthouse decides on, the Manager server forwards and every rank reads its place in,
and its JSON form on the wire."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class QuorumMember:
    """One replica group asking for a quorum: its id, where its Manager server and its
    store are, its step, how many ranks it has, whether it asks to shrink only, and how
    many should_commit failures it has had in a row."""

    replica_id: str
    address: str = ""
    """The Manager server (here: the process that serves it, ``host/rank0``)."""
    store_address: str = ""
    """The replica group's store (``host:port``)."""
    step: int = 0
    world_size: int = 1
    shrink_only: bool = False
    commit_failures: int = 0
    data: str = ""

    @property
    def host(self) -> str:
        """The host the replica group runs on (its Manager server's)."""
        return self.address.split("/", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """The member as a message field."""
        return asdict(self)

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> QuorumMember:
        """Inverse of :meth:`to_json`."""
        return QuorumMember(str(raw["replica_id"]), str(raw["address"]),
                            str(raw["store_address"]), int(raw["step"]),
                            int(raw["world_size"]), bool(raw["shrink_only"]),
                            int(raw["commit_failures"]), str(raw.get("data", "")))


@dataclass(frozen=True)
class Quorum:
    """A quorum the Lighthouse issued: its id and its participants, sorted by replica id."""

    quorum_id: int
    participants: tuple[QuorumMember, ...]
    created: float = 0.0
    """The Lighthouse's clock when it was issued (seconds)."""

    @property
    def replica_ids(self) -> list[str]:
        """The participants' ids, in order."""
        return [p.replica_id for p in self.participants]

    def to_json(self) -> dict[str, Any]:
        """The quorum as a message field."""
        return {"quorum_id": self.quorum_id, "created": self.created,
                "participants": [p.to_json() for p in self.participants]}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> Quorum:
        """Inverse of :meth:`to_json`."""
        return Quorum(int(raw["quorum_id"]),
                      tuple(QuorumMember.from_json(p) for p in raw["participants"]),
                      float(raw.get("created", 0.0)))
