"""The usage view: whose each session is, and each kernel's hold on its slots as an interval
(from its start to the release of its slots), for usage accounting (``docs/usage.md``).

Reads ``SessionRequested`` (``ev.session.*``: owner, project, domain, resource group, name),
``ResourcesAllocated`` and ``ResourcesReleased`` (``ev.node.*``: the kernel's node, slots and
devices; the release ends the interval, whatever freed it: an exit, a failure, a stop, the
node's loss) and ``KernelStarted`` (``ev.agent.*``: the interval starts). Every time is the
event's ``occurred_at``, never the clock of the projector, so a rebuild or a restart folds the
same intervals. ``apply_session`` and ``apply_kernel`` are pure; ``apply_batch`` loads the rows a
batch touches in one query per table and writes the differences back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import CATALOGUE
from events.domain.agent import KernelStarted
from events.domain.node import ResourcesAllocated, ResourcesReleased
from events.domain.session import SessionRequested
from events.envelope import StoredEvent
from projections.base import UNDECODABLE, View, skip_undecodable
from projections.db import sync_rows
from projections.usage.tables import (
    HeldDevice,
    KernelInterval,
    SessionTags,
    kernel_from_row,
    kernel_to_row,
    session_from_row,
    session_to_row,
    tables,
)

NAME = "usage"
VERSION = 2
"""2: indexes on ``last_seq`` and ``ended_at`` (the gateway's reads of what changed)."""
KERNEL_EVENTS = (ResourcesAllocated, KernelStarted, ResourcesReleased)
EVENTS = frozenset(cls.event_name for cls in (SessionRequested, *KERNEL_EVENTS))
_KERNEL_NAMES = frozenset(cls.event_name for cls in KERNEL_EVENTS)


def apply_session(row: SessionTags | None, event: StoredEvent) -> SessionTags | None:
    """A ``SessionRequested``: whose the session is (created once; a repeat changes nothing).
    A session from before tenancy has no owner: its tenant's domain and project stand in."""
    if row is not None:
        return row
    env = event.envelope
    payload = CATALOGUE.decode(env)
    if not isinstance(payload, SessionRequested):
        return None
    owner = payload.owner
    return SessionTags(
        session_id=env.aggregate_id,
        name=payload.spec.name,
        user_id=owner.user_id if owner else "",
        project_id=owner.project_id if owner else env.tenant.project or "",
        domain=owner.domain if owner else env.tenant.domain,
        resource_group=payload.spec.resource_group,
        last_seq=event.seq,
    )


def apply_kernel(
    row: KernelInterval | None, event: StoredEvent, session: SessionTags | None
) -> KernelInterval | None:
    """One kernel event on the kernel's interval (``session``: its session's tags, for an
    allocation). Late, repeated or foreign facts change nothing: an allocation is made once,
    a start counts only from the kernel's own node and before its release, a release once.
    Times never run backwards (agents' clocks may lag the scheduler's): a start is at the
    earliest its allocation, an end at the earliest its start."""
    if row is not None and event.seq <= row.last_seq:
        return row
    env = event.envelope
    at = env.occurred_at
    payload = CATALOGUE.decode(env)
    if isinstance(payload, ResourcesAllocated):
        if row is not None:
            return row
        tags = session or _untagged(payload.session_id, env.tenant.domain, env.tenant.project)
        return KernelInterval(
            kernel_id=payload.kernel_id, session_id=payload.session_id, node_id=env.aggregate_id,
            session_name=tags.name, user_id=tags.user_id, project_id=tags.project_id,
            domain=tags.domain, resource_group=tags.resource_group, slots=payload.slots,
            devices=tuple(HeldDevice(d.index, d.uuid, d.hundredths) for d in payload.devices),
            allocated_at=at, started_at=None, ended_at=None, end_reason=None,
            last_seq=event.seq,
        )  # fmt: skip
    if row is None or env.aggregate_id != row.node_id or row.ended_at is not None:
        return row
    if isinstance(payload, KernelStarted):
        if row.started_at is not None or payload.session_id != row.session_id:
            return row
        return replace(row, started_at=max(at, row.allocated_at), last_seq=event.seq)
    if isinstance(payload, ResourcesReleased):
        since = row.started_at or row.allocated_at
        return replace(row, ended_at=max(at, since), end_reason=payload.reason, last_seq=event.seq)
    return row


def _untagged(session_id: str, domain: str, project: str | None) -> SessionTags:
    """A kernel of a session this view never saw requested (held in the quarantine): counted
    under its tenant, with no user."""
    return SessionTags(session_id, None, "", project or "", domain, "", 0)


def kernel_id_of(event: StoredEvent) -> str:
    kernel_id = event.envelope.payload.get("kernel_id")
    return kernel_id if isinstance(kernel_id, str) else ""


async def apply_batch(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    t = tables(suffix)
    requested = [e for e in events if e.name == SessionRequested.event_name]
    kernel_events = [e for e in events if e.name in _KERNEL_NAMES]
    session_ids = {e.envelope.aggregate_id for e in requested} | {
        str(e.envelope.payload.get("session_id", ""))
        for e in kernel_events
        if e.name == ResourcesAllocated.event_name
    }
    kernel_ids = list({kernel_id_of(e) for e in kernel_events})
    found = await conn.execute(
        select(t.sessions).where(t.sessions.c.session_id.in_(list(session_ids)))
    )
    sessions_before = {r.session_id: session_from_row(r) for r in found}
    found = await conn.execute(select(t.kernels).where(t.kernels.c.kernel_id.in_(kernel_ids)))
    kernels_before = {r.kernel_id: kernel_from_row(r) for r in found}
    sessions, kernels = dict(sessions_before), dict(kernels_before)
    fold(sessions, kernels, events)
    await sync_rows(conn, t.sessions, _rows(sessions_before), _rows(sessions))
    await sync_rows(conn, t.kernels, _rows(kernels_before), _rows(kernels))


def fold(
    sessions: dict[str, SessionTags],
    kernels: dict[str, KernelInterval],
    events: Sequence[StoredEvent],
) -> None:
    """Fold ``events`` (in stream order: a session's request comes before its kernels) into
    the records at hand, keyed by session id and kernel id."""
    for event in events:
        try:
            if event.name == SessionRequested.event_name:
                tags = apply_session(sessions.get(event.envelope.aggregate_id), event)
                if tags is not None:
                    sessions[tags.session_id] = tags
            elif event.name in _KERNEL_NAMES:
                kernel_id = kernel_id_of(event)
                session = sessions.get(str(event.envelope.payload.get("session_id", "")))
                interval = apply_kernel(kernels.get(kernel_id), event, session)
                if interval is not None:
                    kernels[kernel_id] = interval
        except UNDECODABLE as exc:
            skip_undecodable(NAME, event, exc)


def _rows(records: Mapping[str, SessionTags | KernelInterval]) -> dict[str, dict[str, Any]]:
    return {
        key: session_to_row(r) if isinstance(r, SessionTags) else kernel_to_row(r)
        for key, r in records.items()
    }


VIEW = View(NAME, VERSION, EVENTS, lambda suffix: tables(suffix).metadata, apply_batch)
