"""The fragmentation notes of the ``cluster`` answer: why each waiting session does not fit,
in words. Builds what ``cluster.fragmentation.explain`` reads from the views (each node's free
room, ``Room``; each waiting session's ask, ``Ask``) and turns its notes into GraphQL rows.
Reads nothing itself (its callers hand in the views' rows and the owners' names); no subjects."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from decimal import Decimal

import strawberry

from projections.queries import NodeView
from projections.usage.tables import KernelInterval
from schemas.tenancy import GroupScheduling
from services.gateway.cluster.fragmentation import Ask, Device, Room, explain
from services.gateway.cluster.gpus import held_on, reported, use
from services.gateway.cluster.owners import People
from services.gateway.cluster.queues import Order
from services.gateway.cluster.types import FragmentationNote, Node
from services.gateway.cluster.words import FULL

MAX_NOTES = 200
"""Waiting sessions explained per answer, head of each queue first."""


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


async def room_of(
    view: NodeView,
    kernels: Sequence[KernelInterval],
    label: Callable[[KernelInterval], Awaitable[str]],
) -> Room:
    """What is free on the node, its holders in words (``label``)."""
    on = held_on(kernels)
    rooms = []
    for device in reported(view):
        held = on.get(device.index, [])
        whole, used = use(held)
        holders = tuple([(await label(k), h) for k, h in held])
        shared = 0 if whole else used
        rooms.append(
            Device(device.index, whole, shared, device.mig_enabled, holders, device.numa_node)
        )
    return Room(
        view.hostname,
        view.resource_group,
        Node.of(view).state == "schedulable",
        view.capacity.cpu_milli - view.used.cpu_milli,
        view.capacity.memory_bytes - view.used.memory_bytes,
        tuple(rooms),
        capacity=view.capacity,
        images=frozenset(view.images),
        node_id=view.id,
    )


async def asks_of(order: Order, people: People) -> list[Ask]:
    asks = []
    # Every group's head first, then every group's second…: a long queue in one group does
    # not leave another group's head unexplained.
    by_place = sorted(order, key=lambda entry: entry[1] or len(order) + 1)
    for view, position, length in by_place[:MAX_NOTES]:
        r = view.record
        count = max(r.kernel_count, 1)
        user = await people.name(r.user_id)
        label = f"session {r.name or r.id[:8]}" + (f" of {user}" if user else "")
        asks.append(
            Ask(
                r.id,
                label,
                r.resource_group,
                r.cpu_milli // count,
                r.memory_bytes // count,
                r.gpu_hundredths // count,
                kernels=count,
                single_node=r.cluster_mode != "multi-node",
                place=f"{ordinal(position)} of {length} waiting" if position else "",
                image=r.image,
            )
        )
    return asks


async def notes_of(
    rooms: list[Room], order: Order, people: People, policies: Mapping[str, GroupScheduling]
) -> list[FragmentationNote]:
    """The notes on the waiting sessions in ``order`` (the first ``MAX_NOTES``), given the
    nodes' ``rooms`` and each group's scheduling settings."""
    said = explain(rooms, await asks_of(order, people), policies)
    return [
        FragmentationNote(
            session_id=strawberry.ID(n.session_id),
            resource_group=n.group,
            kind=n.kind.value,
            text=n.text,
            reason=n.reason,
            situation=n.situation,
            free_gpu=str(Decimal(n.free_gpu_hundredths) / FULL),
            need_gpu=str(Decimal(n.need_gpu_hundredths) / FULL),
        )
        for n in said
    ]
