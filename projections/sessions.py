"""The sessions view: one row per session and its status history with reasons.

Reads ``ev.session.*`` (SessionRequested, SessionAdmitted and every status change). ``apply``
is pure: a row and an event in, the new row and the history entry out; ``apply_batch`` loads the
rows a batch touches in one query and writes the differences back.

Owner columns (access key, user, project, domain) come from ``SessionRequested.owner``, the
scopes authorisation and quotas use; sessions from before tenancy have none (NULL), so only a
superadmin's unfiltered listing shows them. Batch and cluster columns (dependencies, start time,
timeout, cluster mode, kernel count) come from the spec; ``result`` follows status and exit code
(``schemas.session.result_of``). Per-kernel events (``SessionKernel*``) are not read here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    select,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import CATALOGUE
from events.domain.session import (
    SessionAdmitted,
    SessionCancelled,
    SessionCreating,
    SessionFailed,
    SessionPendingReasonChanged,
    SessionPreparing,
    SessionRequested,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from events.envelope import StoredEvent
from projections.base import UNDECODABLE, View, skip_undecodable
from projections.db import UTCDateTime, sync_rows
from schemas.session import SessionStatus, result_of

NAME = "sessions"
VERSION = 3
"""v2: owner columns (access key, user, project, domain from the owner), priority, admitted.
v3: batch and cluster columns (depends_on, starts_at, timeout_s, cluster_mode, kernel_count)
and result."""
EVENTS = frozenset(
    cls.event_name
    for cls in (
        SessionRequested,
        SessionAdmitted,
        SessionPendingReasonChanged,
        SessionScheduled,
        SessionPreparing,
        SessionCreating,
        SessionStarted,
        SessionTerminating,
        SessionTerminated,
        SessionCancelled,
        SessionFailed,
    )
)


@dataclass(frozen=True, slots=True)
class SessionTables:
    metadata: MetaData
    sessions: Table
    history: Table


@lru_cache(maxsize=8)
def tables(suffix: str = "") -> SessionTables:
    """The view's tables; a rebuild builds a second set under a suffix and swaps it in."""
    md = MetaData()
    sessions = Table(
        f"sessions{suffix}",
        md,
        Column("id", String(64), primary_key=True),
        Column("created_seq", BigInteger, nullable=False),  # the keyset for pagination
        Column("name", String(64)),
        Column("status", String(16), nullable=False),
        Column("status_reason", String, nullable=False),
        Column("type", String(16), nullable=False),
        Column("image", String(256), nullable=False),
        Column("resource_group", String(64), nullable=False),
        Column("cpu_milli", BigInteger, nullable=False),
        Column("memory_bytes", BigInteger, nullable=False),
        Column("gpu_hundredths", BigInteger, nullable=False),
        Column("command", JSON),
        Column("kernel_ids", JSON, nullable=False),
        Column("node_ids", JSON, nullable=False),
        Column("exit_code", Integer),
        Column("result", String(16)),  # success | failure; NULL while running or if cancelled
        Column("depends_on", JSON, nullable=False),
        Column("starts_at", UTCDateTime),
        Column("timeout_s", Integer),
        Column("cluster_mode", String(16), nullable=False),
        Column("kernel_count", Integer, nullable=False),
        Column("project", String(64)),  # the envelope's tenant project
        Column("owner_kind", String(16), nullable=False),  # who asked: the envelope's actor
        Column("owner_id", String(128), nullable=False),
        # Whose it is (SessionRequested.owner); NULL for sessions from before tenancy.
        Column("access_key", String(64)),
        Column("user_id", String(64)),
        Column("project_id", String(64)),
        Column("domain", String(64)),
        Column("priority", Integer, nullable=False),
        Column("admitted", Boolean, nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("last_seq", BigInteger, nullable=False),
    )
    Index(f"ix_{sessions.name}_created", sessions.c.created_seq, unique=True)
    Index(f"ix_{sessions.name}_status", sessions.c.status, sessions.c.created_seq)
    # A domain admin's and a user's listings: an index range scan however deep the page.
    Index(f"ix_{sessions.name}_domain", sessions.c.domain, sessions.c.created_seq)
    Index(f"ix_{sessions.name}_user", sessions.c.user_id, sessions.c.created_seq)
    history = Table(
        f"session_status_history{suffix}",
        md,
        Column("session_id", String(64), primary_key=True),
        Column("seq", BigInteger, primary_key=True),
        Column("status", String(16), nullable=False),
        Column("reason", String, nullable=False),
        Column("at", UTCDateTime, nullable=False),
    )
    return SessionTables(md, sessions, history)


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One row of the view, and the view's one read shape: ``apply`` folds it, the queries
    return it (``projections.queries.SessionView``) and the gateway resolves GraphQL from it.
    Its fields are the table's columns, one for one (``to_row``/``from_row``)."""

    id: str
    created_seq: int
    name: str | None
    status: SessionStatus
    status_reason: str
    type: str
    image: str
    resource_group: str
    cpu_milli: int
    memory_bytes: int
    gpu_hundredths: int
    command: tuple[str, ...] | None
    kernel_ids: tuple[str, ...]
    node_ids: tuple[str, ...]
    exit_code: int | None
    result: str | None
    """success | failure once ended (``schemas.session.result_of``); None before, or cancelled."""
    depends_on: tuple[str, ...]
    starts_at: datetime | None
    timeout_s: int | None
    cluster_mode: str
    kernel_count: int
    project: str | None
    owner_kind: str
    owner_id: str
    access_key: str | None
    user_id: str | None
    project_id: str | None
    domain: str | None
    priority: int
    admitted: bool
    """Slots reserved on every scope (at once for a session from before tenancy)."""
    created_at: datetime
    updated_at: datetime
    last_seq: int
    """The seq of the last event applied to this row: older or repeated events change nothing."""


@dataclass(frozen=True, slots=True)
class StatusEntry:
    """One row of the status history; also what the gateway's live feed yields."""

    session_id: str
    seq: int
    status: SessionStatus
    reason: str
    at: datetime


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
            created_at=env.occurred_at,
            updated_at=env.occurred_at,
            last_seq=event.seq,
        )
        return row, _entry(row, event)
    if row is None:  # a change to a session this view never saw created: nothing to change
        return None, None
    changes: dict[str, Any] = {}
    match payload:
        case SessionAdmitted(reason=reason):
            status = SessionStatus.PENDING
            changes["admitted"] = True
        case SessionPendingReasonChanged(reason=reason):
            status = SessionStatus.PENDING
        case SessionScheduled(placements=placements, reason=reason):
            status = SessionStatus.SCHEDULED
            # In kernel order, each node once: what a user reads as "where it runs".
            nodes = [placements[k] for k in row.kernel_ids if k in placements]
            changes["node_ids"] = tuple(dict.fromkeys(nodes))
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
        case SessionCancelled(reason=reason):
            status = SessionStatus.CANCELLED
        case SessionFailed(reason=reason):
            status = SessionStatus.ERROR
        case _:
            return row, None
    outcome = result_of(status, changes.get("exit_code", row.exit_code))
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


def _entry(row: SessionRecord, event: StoredEvent) -> StatusEntry:
    return StatusEntry(row.id, event.seq, row.status, row.status_reason, row.updated_at)


_COLUMNS = tuple(f.name for f in fields(SessionRecord))
_LISTS = ("command", "kernel_ids", "node_ids", "depends_on")
"""Tuples in the record, JSON lists in the table."""


def to_row(record: SessionRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in _COLUMNS}
    row["status"] = record.status.value
    for name in _LISTS:
        row[name] = None if row[name] is None else list(row[name])
    return row


def from_row(row: Any) -> SessionRecord:
    values = {name: getattr(row, name) for name in _COLUMNS}
    values["status"] = SessionStatus(row.status)
    for name in _LISTS:
        values[name] = None if values[name] is None else tuple(values[name])
    return SessionRecord(**values)


def entry_from_row(row: Any) -> StatusEntry:
    return StatusEntry(row.session_id, row.seq, SessionStatus(row.status), row.reason, row.at)


async def apply_batch(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    """Apply a batch: read the touched rows once, fold in memory, write the differences."""
    t = tables(suffix)
    ids = list({e.envelope.aggregate_id for e in events})
    found = await conn.execute(select(t.sessions).where(t.sessions.c.id.in_(ids)))
    before = {row.id: from_row(row) for row in found}
    after = dict(before)
    entries: list[StatusEntry] = []
    for event in events:
        sid = event.envelope.aggregate_id
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
