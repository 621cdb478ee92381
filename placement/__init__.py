"""Placement: which node and devices take each waiting session of a resource group, or why
it waits. Pure: a snapshot in, decisions out; it reads and writes no subject.

``Placer`` (one per group) is the entry point; ``place`` is a one-shot placer. The modules:
``model`` (inputs, outputs), ``queueing`` (the order), ``devices`` (device-level allocation),
``nodes`` (a node during a pass), ``index`` (nodes bucketed by free capacity), ``fairshare``
(decayed usage and the fair-share factors), ``explain``
(why a session waits), ``engine`` (the pass, the head of the queue), ``judge`` (one request
asked of the same pass, for the views that explain a decision: fits now, waits, never).

A layer of its own below the services (it imports only ``schemas``): the scheduler decides with
it and the gateway explains with it, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from placement.engine import Placer
from placement.fairshare import FairShareInput
from placement.model import (
    Decision,
    DeviceState,
    KernelPlacement,
    KernelRequest,
    NodeOffer,
    Placed,
    SessionRequest,
    Waiting,
)
from schemas.resources import ResourceSlots
from schemas.tenancy import GroupScheduling

__all__ = [
    "Decision",
    "DeviceState",
    "FairShareInput",
    "KernelPlacement",
    "KernelRequest",
    "NodeOffer",
    "Placed",
    "Placer",
    "SessionRequest",
    "Waiting",
    "place",
]


def place(
    requests: Sequence[SessionRequest],
    nodes: Sequence[NodeOffer],
    policy: GroupScheduling | None = None,
    *,
    group: str = "",
    usage: Mapping[str, ResourceSlots] | None = None,
    now: float = 0.0,
    fair: FairShareInput | None = None,
) -> list[Decision]:
    """Decide every request once, with a fresh placer (no cursor, no reservation kept)."""
    return Placer().place(
        requests, nodes, policy or GroupScheduling(), group=group, usage=usage, now=now, fair=fair
    )
