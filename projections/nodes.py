"""The nodes view: each machine's ledger (capacity, what is allocated and used, cordon, lost)
and its allocations, one row per kernel. A node removed for good (``NodeRemoved``) leaves the
view: the log keeps its history.

Reads ``ev.node.*`` (the scheduler's ledger). ``apply`` is pure: a node and an event in, the
node after it out; ``apply_batch`` loads the touched nodes once and writes the differences.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import BigInteger, Boolean, Column, Integer, MetaData, String, Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import CATALOGUE
from events.domain.node import (
    KernelStopRequested,
    NodeCapacityChanged,
    NodeCordoned,
    NodeDrainRequested,
    NodeLost,
    NodeRecovered,
    NodeRegistered,
    NodeRemoved,
    NodeUncordoned,
    ResourcesAllocated,
    ResourcesReleased,
)
from events.envelope import StoredEvent
from projections.base import UNDECODABLE, View, skip_undecodable
from projections.db import UTCDateTime, slot_columns, slot_values, slots_from, sync_rows
from schemas.resources import ResourceSlots

NAME = "nodes"
DRAINING = "draining: "
"""How a drain's reason starts in the view (a drained node is a draining one left empty)."""
VERSION = 1
EVENTS = frozenset(
    cls.event_name
    for cls in (
        NodeRegistered,
        NodeCapacityChanged,
        ResourcesAllocated,
        KernelStopRequested,
        ResourcesReleased,
        NodeCordoned,
        NodeDrainRequested,
        NodeUncordoned,
        NodeLost,
        NodeRecovered,
        NodeRemoved,
    )
)


@dataclass(frozen=True, slots=True)
class NodeTables:
    metadata: MetaData
    nodes: Table
    allocations: Table


@lru_cache(maxsize=8)
def tables(suffix: str = "") -> NodeTables:
    """The view's tables; a rebuild builds a second set under a suffix and swaps it in."""
    md = MetaData()
    nodes = Table(
        f"nodes{suffix}",
        md,
        Column("id", String(64), primary_key=True),
        Column("hostname", String(255), nullable=False),
        Column("resource_group", String(64), nullable=False),
        *slot_columns(),  # capacity
        *slot_columns("used_"),  # the sum of the allocations, kept with them so it cannot drift
        Column("allocations", Integer, nullable=False),
        Column("cordoned", Boolean, nullable=False),
        Column("lost", Boolean, nullable=False),
        Column("reason", String, nullable=False),  # of the last cordon / lost change
        Column("registered_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("last_seq", BigInteger, nullable=False),
    )
    allocations = Table(
        f"node_allocations{suffix}",
        md,
        Column("node_id", String(64), primary_key=True),
        Column("kernel_id", String(64), primary_key=True),
        Column("session_id", String(64), nullable=False),
        *slot_columns(),
        Column("image", String(256), nullable=False),
        Column("stopping", Boolean, nullable=False),
        Column("seq", BigInteger, nullable=False),
    )
    return NodeTables(md, nodes, allocations)


@dataclass(frozen=True, slots=True)
class AllocationRecord:
    session_id: str
    slots: ResourceSlots
    image: str
    stopping: bool
    seq: int


@dataclass(frozen=True, slots=True)
class NodeRecord:
    id: str
    hostname: str
    resource_group: str
    capacity: ResourceSlots
    cordoned: bool
    lost: bool
    reason: str
    registered_at: datetime
    updated_at: datetime
    last_seq: int
    kernels: Mapping[str, AllocationRecord]
    """Kernel id -> allocation, a set as on the ledger. Never mutated: apply makes a new one."""

    @property
    def used(self) -> ResourceSlots:
        total = ResourceSlots()
        for allocation in self.kernels.values():
            total = total + allocation.slots
        return total


def apply(node: NodeRecord | None, event: StoredEvent) -> NodeRecord | None:
    """One ledger event on one node: the node after it (unchanged if already applied; None
    once removed)."""
    if node is not None and event.seq <= node.last_seq:
        return node
    env = event.envelope
    payload = CATALOGUE.decode(env)
    if isinstance(payload, NodeRegistered):
        if node is not None:  # the ledger is created once
            return node
        return NodeRecord(
            id=env.aggregate_id,
            hostname=payload.hostname,
            resource_group=payload.resource_group,
            capacity=payload.capacity,
            cordoned=False,
            lost=False,
            reason="",
            registered_at=env.occurred_at,
            updated_at=env.occurred_at,
            last_seq=event.seq,
            kernels={},
        )
    if node is None:
        return None
    node = replace(node, updated_at=env.occurred_at, last_seq=event.seq)
    match payload:
        case NodeCapacityChanged(capacity=capacity):
            return replace(node, capacity=capacity)
        case ResourcesAllocated():
            held = AllocationRecord(
                payload.session_id, payload.slots, payload.image, False, event.seq
            )
            return replace(node, kernels={**node.kernels, payload.kernel_id: held})
        case KernelStopRequested(kernel_id=kernel_id) if kernel_id in node.kernels:
            stopping = replace(node.kernels[kernel_id], stopping=True)
            return replace(node, kernels={**node.kernels, kernel_id: stopping})
        case ResourcesReleased(kernel_id=kernel_id):
            return replace(node, kernels={k: a for k, a in node.kernels.items() if k != kernel_id})
        case NodeCordoned(reason=reason):
            return replace(node, cordoned=True, reason=reason)
        case NodeDrainRequested(reason=reason, deadline=deadline):
            until = f" (stopped at {deadline.isoformat()})" if deadline is not None else ""
            return replace(node, cordoned=True, reason=f"{DRAINING}{reason}{until}")
        case NodeUncordoned(reason=reason):
            return replace(node, cordoned=False, reason=reason)
        case NodeLost(reason=reason):
            return replace(node, lost=True, reason=reason)
        case NodeRecovered(reason=reason):
            return replace(node, lost=False, reason=reason)
        case NodeRemoved():
            return None
    return node


def _node_row(node: NodeRecord) -> dict[str, Any]:
    plain = ("id", "hostname", "resource_group", "cordoned", "lost", "reason")
    return {
        **{name: getattr(node, name) for name in plain},
        **slot_values("", node.capacity),
        **slot_values("used_", node.used),
        "allocations": len(node.kernels),
        "registered_at": node.registered_at,
        "updated_at": node.updated_at,
        "last_seq": node.last_seq,
    }


def _allocation_row(node_id: str, kernel_id: str, held: AllocationRecord) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "kernel_id": kernel_id,
        "session_id": held.session_id,
        **slot_values("", held.slots),
        "image": held.image,
        "stopping": held.stopping,
        "seq": held.seq,
    }


async def _load_nodes(
    conn: AsyncConnection, t: NodeTables, ids: list[str]
) -> dict[str, NodeRecord]:
    if not ids:
        return {}
    kernels: dict[str, dict[str, AllocationRecord]] = {i: {} for i in ids}
    held = await conn.execute(select(t.allocations).where(t.allocations.c.node_id.in_(ids)))
    for a in held:
        kernels[a.node_id][a.kernel_id] = AllocationRecord(
            a.session_id, slots_from(a), a.image, a.stopping, a.seq
        )
    rows = await conn.execute(select(t.nodes).where(t.nodes.c.id.in_(ids)))
    return {
        r.id: NodeRecord(
            id=r.id,
            hostname=r.hostname,
            resource_group=r.resource_group,
            capacity=slots_from(r),
            cordoned=r.cordoned,
            lost=r.lost,
            reason=r.reason,
            registered_at=r.registered_at,
            updated_at=r.updated_at,
            last_seq=r.last_seq,
            kernels=kernels[r.id],
        )
        for r in rows
    }


async def apply_batch(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    """Apply a batch: read the touched nodes once, fold in memory, write the differences."""
    t = tables(suffix)
    before = await _load_nodes(conn, t, list({e.envelope.aggregate_id for e in events}))
    after = dict(before)
    for event in events:
        key = event.envelope.aggregate_id
        try:
            node = apply(after.get(key), event)
        except UNDECODABLE as exc:
            skip_undecodable(NAME, event, exc)
            continue
        if node is not None:
            after[key] = node
        elif key in after and event.envelope.name == NodeRemoved.event_name:
            del after[key]  # gone from the view (its rows deleted below)
    await sync_rows(conn, t.nodes, _rows(before), _rows(after))
    await sync_rows(conn, t.allocations, _held(before), _held(after))


def _rows(nodes: Mapping[str, NodeRecord]) -> dict[str, dict[str, Any]]:
    return {k: _node_row(n) for k, n in nodes.items()}


def _held(nodes: Mapping[str, NodeRecord]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (node.id, kernel_id): _allocation_row(node.id, kernel_id, held)
        for node in nodes.values()
        for kernel_id, held in node.kernels.items()
    }


VIEW = View(NAME, VERSION, EVENTS, lambda suffix: tables(suffix).metadata, apply_batch)
