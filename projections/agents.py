"""The agents view: what the agent on each machine reports about itself (backend, epoch,
hardware, devices, images, the image pulls in flight), shown next to the node's ledger.

Reads ``ev.agent.*`` (AgentRegistered, AgentImagesChanged, ImagePull*; kernel facts become
session changes, which the sessions view shows). ``apply`` is pure; ``apply_batch`` does the I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, MetaData, String, Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import CATALOGUE
from events.domain.agent import (
    AgentImagesChanged,
    AgentRegistered,
    ImagePullFailed,
    ImagePullFinished,
    ImagePullProgressed,
    ImagePullStarted,
)
from events.envelope import StoredEvent
from projections.base import UNDECODABLE, View, skip_undecodable
from projections.db import UTCDateTime, slot_columns, slot_values, slots_from, sync_rows
from schemas.resources import ResourceSlots

NAME = "agents"
VERSION = 2
"""v2: pulls (the image pulls in flight, from ``ImagePull*``)."""
PULLS = (ImagePullStarted, ImagePullProgressed, ImagePullFinished, ImagePullFailed)
EVENTS = frozenset(
    {AgentRegistered.event_name, AgentImagesChanged.event_name, *(c.event_name for c in PULLS)}
)


@lru_cache(maxsize=8)
def tables(suffix: str = "") -> Table:
    """The view's table; a rebuild builds a second one under a suffix and swaps it in."""
    return Table(
        f"agents{suffix}",
        MetaData(),
        # The agent's id is its node's id (uuid5 of the host name), so the two rows join.
        Column("id", String(64), primary_key=True),
        Column("hostname", String(255), nullable=False),
        Column("backend", String(32), nullable=False),
        Column("epoch", BigInteger, nullable=False),
        *slot_columns(),  # what the machine reports; the node row holds what is scheduled
        Column("devices", JSON, nullable=False),
        Column("images", JSON, nullable=False),
        # Reference -> {"done_bytes", "total_bytes", "since", "kernels"} while it is pulled.
        Column("pulls", JSON, nullable=False),
        Column("registered_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("last_seq", BigInteger, nullable=False),
    )


@dataclass(frozen=True, slots=True)
class AgentRecord:
    id: str
    hostname: str
    backend: str
    epoch: int
    capacity: ResourceSlots
    devices: tuple[dict[str, Any], ...]
    images: tuple[str, ...]
    pulls: dict[str, dict[str, Any]]
    registered_at: datetime
    updated_at: datetime
    last_seq: int


def apply(agent: AgentRecord | None, event: StoredEvent) -> AgentRecord | None:
    """One agent fact on one agent: the agent after it (unchanged if already applied)."""
    if agent is not None and event.seq <= agent.last_seq:
        return agent
    env = event.envelope
    payload = CATALOGUE.decode(env)
    if isinstance(payload, AgentRegistered):
        return AgentRecord(
            id=env.aggregate_id,
            hostname=payload.hostname,
            backend=payload.backend,
            epoch=payload.epoch,
            capacity=payload.capacity,
            devices=tuple(d.model_dump(mode="json") for d in payload.devices),
            images=payload.images,
            # A restarted agent begins its pulls again: each says so with a new start.
            pulls={},
            # A re-registration (a new epoch) keeps when the machine first joined.
            registered_at=agent.registered_at if agent is not None else env.occurred_at,
            updated_at=env.occurred_at,
            last_seq=event.seq,
        )
    if agent is not None and isinstance(payload, AgentImagesChanged):
        return replace(agent, images=payload.images, updated_at=env.occurred_at, last_seq=event.seq)
    if agent is not None and isinstance(payload, PULLS):
        pulls = _pulled(dict(agent.pulls), payload, env.occurred_at)
        return replace(agent, pulls=pulls, updated_at=env.occurred_at, last_seq=event.seq)
    return agent


def _pulled(
    pulls: dict[str, dict[str, Any]],
    event: ImagePullStarted | ImagePullProgressed | ImagePullFinished | ImagePullFailed,
    at: datetime,
) -> dict[str, dict[str, Any]]:
    ref = event.reference
    if isinstance(event, ImagePullFinished | ImagePullFailed):
        pulls.pop(ref, None)
        return pulls
    known = pulls.get(ref) or {"done_bytes": 0, "total_bytes": 0, "since": at.isoformat(),
                                "kernels": 0}  # fmt: skip
    if isinstance(event, ImagePullStarted):
        pulls[ref] = {**known, "kernels": known["kernels"] + len(event.kernels)}
    else:
        pulls[ref] = {**known, "done_bytes": event.done_bytes, "total_bytes": event.total_bytes}
    return pulls


_PLAIN = tuple(f.name for f in fields(AgentRecord) if f.name != "capacity")


def _row(agent: AgentRecord) -> dict[str, Any]:
    row = {name: getattr(agent, name) for name in _PLAIN}
    row.update(slot_values("", agent.capacity))
    row.update(devices=list(agent.devices), images=list(agent.images), pulls=dict(agent.pulls))
    return row


def _record(row: Any) -> AgentRecord:
    values = {name: getattr(row, name) for name in _PLAIN}
    values.update(devices=tuple(row.devices), images=tuple(row.images), pulls=dict(row.pulls or {}))
    return AgentRecord(capacity=slots_from(row), **values)


async def apply_batch(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    """Apply a batch: read the touched agents once, fold in memory, write the differences."""
    table = tables(suffix)
    ids = list({e.envelope.aggregate_id for e in events})
    before = {
        r.id: _record(r) for r in await conn.execute(select(table).where(table.c.id.in_(ids)))
    }
    after = dict(before)
    for event in events:
        key = event.envelope.aggregate_id
        try:
            agent = apply(after.get(key), event)
        except UNDECODABLE as exc:
            skip_undecodable(NAME, event, exc)
            continue
        if agent is not None:
            after[key] = agent
    await sync_rows(
        conn,
        table,
        {k: _row(a) for k, a in before.items()},
        {k: _row(a) for k, a in after.items()},
    )


VIEW = View(NAME, VERSION, EVENTS, lambda suffix: tables(suffix).metadata, apply_batch)
