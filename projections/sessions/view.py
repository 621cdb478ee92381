"""The sessions view: one row per session and its status history with reasons.

Reads ``ev.session.*`` (SessionRequested, SessionAdmitted and every status change). ``apply``
is pure: a row and an event in, the new row and the history entry out; ``apply_batch`` loads the
rows a batch touches in one query and writes the differences back. Its tables, its record and
the row mapping are in ``projections.sessions.tables``.

Owner columns (access key, user, project, domain) come from ``SessionRequested.owner``, the
scopes authorisation and quotas use; sessions from before tenancy have none (NULL), so only a
superadmin's unfiltered listing shows them. Batch and cluster columns (dependencies, start time,
timeout, cluster mode, kernel count) come from the spec, its mounts from ``SessionRequested``
(as the scheduler resolved them); ``result`` follows status and exit code
(``schemas.session.result_of``). Per-kernel events (``SessionKernel*``) are not read here, but
the apps each kernel serves are: ``KernelServicePortsReported`` (from ``ev.agent.*``, keyed by
its ``session_id``), for the kernels the session has now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import CATALOGUE
from events.domain.agent import KernelServicePortsReported
from events.domain.session import (
    SessionAdmitted,
    SessionCancelled,
    SessionCreating,
    SessionFailed,
    SessionPendingReasonChanged,
    SessionPreparing,
    SessionPulling,
    SessionRequested,
    SessionRequeued,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from events.envelope import StoredEvent
from projections.base import UNDECODABLE, View, skip_undecodable
from projections.db import sync_rows
from projections.sessions.tables import (
    KernelPort,
    SessionRecord,
    StatusEntry,
    from_row,
    tables,
    to_row,
)
from schemas.session import SessionStatus, result_of

NAME = "sessions"
VERSION = 6
"""v2: owner columns (access key, user, project, domain from the owner), priority, admitted.
v3: batch and cluster columns (depends_on, starts_at, timeout_s, cluster_mode, kernel_count)
and result. v4: mounts (the folders it mounts, from ``SessionRequested.mounts``). v5:
service_ports (its kernels' apps, from ``KernelServicePortsReported``). v6: fair_share (its
owner's factors while it waits in a fair-share group)."""
EVENTS = frozenset(
    cls.event_name
    for cls in (
        SessionRequested,
        SessionAdmitted,
        SessionPendingReasonChanged,
        SessionScheduled,
        SessionPulling,
        SessionPreparing,
        SessionCreating,
        SessionStarted,
        SessionTerminating,
        SessionTerminated,
        SessionRequeued,
        SessionCancelled,
        SessionFailed,
        KernelServicePortsReported,
    )
)


def apply(
    row: SessionRecord | None, event: StoredEvent
) -> tuple[SessionRecord | None, StatusEntry | None]:
    """One event on one session's row: the row after it, and the history entry it adds (None
    when the event changes nothing, e.g. because the row has already seen it)."""
    if row is not None and event.seq <= row.last_seq:
        return row, None
    env = event.envelope
    payload = CATALOGUE.decode(env)
    if isinstance(payload, SessionRequested):
        if row is not None:  # created once, forever: a second creation cannot be real
            return row, None
        spec, total, owner = payload.spec, payload.spec.total, payload.owner
        row = SessionRecord(
            id=env.aggregate_id,
            created_seq=event.seq,
            name=spec.name,
            status=SessionStatus.PENDING,
            status_reason=payload.reason,
            type=spec.type.value,
            image=spec.image,
            resource_group=spec.resource_group,
            cpu_milli=total.cpu_milli,
            memory_bytes=total.memory_bytes,
            gpu_hundredths=total.gpu_hundredths,
            command=spec.command,
            kernel_ids=payload.kernel_ids,
            node_ids=(),
            exit_code=None,
            result=None,
            depends_on=spec.depends_on,
            starts_at=spec.starts_at,
            timeout_s=spec.timeout_s,
            cluster_mode=spec.cluster_mode.value,
            kernel_count=len(spec.kernels),
            mounts=payload.mounts,
            service_ports=(),
            project=env.tenant.project,
            owner_kind=env.actor.kind.value,
            owner_id=env.actor.id,
            access_key=owner.access_key if owner else None,
            user_id=owner.user_id if owner else None,
            project_id=owner.project_id if owner else None,
            domain=owner.domain if owner else None,
            priority=spec.priority,
            # As the aggregate decides: no owner, no scopes to reserve on.
            admitted=owner is None,
            fair_share=None,
            created_at=env.occurred_at,
            updated_at=env.occurred_at,
            last_seq=event.seq,
        )
        return row, _entry(row, event)
    if row is None:  # a change to a session this view never saw created: nothing to change
        return None, None
    if isinstance(payload, KernelServicePortsReported):
        return _ports(row, event, payload), None
    # Said only while waiting in a fair-share group: every other change clears it.
    changes: dict[str, Any] = {"fair_share": None}
    match payload:
        case SessionAdmitted(reason=reason):
            status = SessionStatus.PENDING
            changes["admitted"] = True
        case SessionPendingReasonChanged(reason=reason):
            status = SessionStatus.PENDING
            changes["fair_share"] = payload.fair_share
        case SessionScheduled(placements=placements, reason=reason):
            status = SessionStatus.SCHEDULED
            # In kernel order, each node once: what a user reads as "where it runs".
            nodes = [placements[k] for k in row.kernel_ids if k in placements]
            changes["node_ids"] = tuple(dict.fromkeys(nodes))
            changes["admitted"] = True  # admitted by its placement when one pass did both
        case SessionPulling(reason=reason):
            status = SessionStatus.PULLING
        case SessionPreparing(reason=reason):
            status = SessionStatus.PREPARING
        case SessionCreating(reason=reason):
            status = SessionStatus.CREATING
        case SessionStarted(reason=reason):
            status = SessionStatus.RUNNING
        case SessionTerminating(reason=reason):
            status = SessionStatus.TERMINATING
        case SessionTerminated(reason=reason, exit_code=exit_code):
            status = SessionStatus.TERMINATED
            changes["exit_code"] = exit_code
        case SessionRequeued(reason=reason, kernel_ids=kernel_ids):
            status = SessionStatus.PENDING  # its node was lost: placed again, new kernels
            changes.update(kernel_ids=kernel_ids, node_ids=(), exit_code=None, service_ports=())
        case SessionCancelled(reason=reason):
            status = SessionStatus.CANCELLED
        case SessionFailed(reason=reason):
            status = SessionStatus.ERROR
        case _:
            return row, None
    asked = isinstance(payload, SessionTerminated) and payload.asked
    outcome = result_of(status, changes.get("exit_code", row.exit_code), asked)
    row = replace(
        row,
        status=status,
        status_reason=reason,
        result=outcome.value if outcome is not None else None,
        updated_at=env.occurred_at,
        last_seq=event.seq,
        **changes,
    )
    return row, _entry(row, event)


def _ports(
    row: SessionRecord, event: StoredEvent, reported: KernelServicePortsReported
) -> SessionRecord:
    """A kernel's apps replace what it reported before; a kernel the session no longer has
    (placed again after its node was lost) changes nothing."""
    if reported.kernel_id not in row.kernel_ids:
        return row
    ports = [p for p in row.service_ports if p.kernel_id != reported.kernel_id]
    ports += [KernelPort(kernel_id=reported.kernel_id, **p.model_dump()) for p in reported.ports]
    order = {k: i for i, k in enumerate(row.kernel_ids)}
    ports.sort(key=lambda p: order[p.kernel_id])  # stable: each kernel's in its image's order
    return replace(row, service_ports=tuple(ports), last_seq=event.seq)


def _session_of(event: StoredEvent) -> str:
    # Agent events are keyed by their agent; the session they concern is in the payload.
    if event.envelope.name == KernelServicePortsReported.event_name:
        return str(event.envelope.payload.get("session_id", ""))
    return event.envelope.aggregate_id


def _entry(row: SessionRecord, event: StoredEvent) -> StatusEntry:
    return StatusEntry(row.id, event.seq, row.status, row.status_reason, row.updated_at)


async def apply_batch(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    """Apply a batch: read the touched rows once, fold in memory, write the differences."""
    t = tables(suffix)
    ids = list({_session_of(e) for e in events})
    found = await conn.execute(select(t.sessions).where(t.sessions.c.id.in_(ids)))
    before = {row.id: from_row(row) for row in found}
    after = dict(before)
    entries: list[StatusEntry] = []
    for event in events:
        sid = _session_of(event)
        try:
            record, entry = apply(after.get(sid), event)
        except UNDECODABLE as exc:
            skip_undecodable(NAME, event, exc)
            continue
        if record is not None:
            after[sid] = record
        if entry is not None:
            entries.append(entry)
    await sync_rows(
        conn,
        t.sessions,
        {k: to_row(v) for k, v in before.items()},
        {k: to_row(v) for k, v in after.items()},
    )
    if entries:
        history = [{**asdict(e), "status": e.status.value} for e in entries]
        await conn.execute(t.history.insert(), history)


VIEW = View(NAME, VERSION, EVENTS, lambda suffix: tables(suffix).metadata, apply_batch)
