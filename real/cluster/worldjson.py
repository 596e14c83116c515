"""A :class:`~elastic_sim.world.World` as JSON, for handing it to a node."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from elastic_sim.world import CollectiveModel, HostSpec, LinkSpec, World


def world_to_json(world: World) -> dict[str, Any]:
    """``world`` as plain JSON data."""
    data = asdict(world)
    data["args"] = dict(world.args)
    return data


def world_from_json(data: dict[str, Any]) -> World:
    """The world :func:`world_to_json` described."""
    fields = dict(data)
    fields["hosts"] = tuple(HostSpec(**h) for h in fields["hosts"])
    fields["links"] = tuple(LinkSpec(**link) for link in fields.get("links", ()))
    fields["collectives"] = CollectiveModel(**fields.get("collectives", {}))
    return World(**fields)
