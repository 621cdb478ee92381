"""The views' query types and the queries that return them: sessions a page at a time (Relay
keyset cursors, filters), one session with its status history, the nodes, and how far the views
have read the log. The gateway resolves GraphQL from these types directly, so each view has one
read shape. Reads only the views' tables (``sessions``, ``session_status_history``, ``nodes``,
``agents``, ``projection_positions``); no subjects."""

from __future__ import annotations

import asyncio
import base64
import binascii
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from projections import agents, nodes
from projections.base import positions
from projections.db import slots_from
from projections.sessions import tables as session_tables
from projections.views import VIEWS
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus

_T = TypeVar("_T")
MAX_PAGE = 500
_CURSOR = "session:"
_NEWEST_CURSOR = "session-newest:"


class InvalidCursorError(ValueError):
    """A cursor that this code did not hand out."""


@dataclass(frozen=True, slots=True)
class SessionView:
    """A session as every reader sees it: its row and its status history."""

    record: session_tables.SessionRecord
    history: tuple[session_tables.StatusEntry, ...] = ()
    """Oldest first; filled by ``get_session`` (and by ``list_sessions`` when asked)."""

    @property
    def cursor(self) -> str:
        return encode_cursor(self.record.created_seq)


@dataclass(frozen=True, slots=True)
class SessionPage:
    rows: list[SessionView]
    has_next: bool
    newest_first: bool = False
    """The order the page was read in: its cursors page only that order."""

    def cursor_of(self, row: SessionView) -> str:
        kind = _NEWEST_CURSOR if self.newest_first else _CURSOR
        return encode_cursor(row.record.created_seq, kind)

    @property
    def cursors(self) -> list[str]:
        return [self.cursor_of(row) for row in self.rows]

    @property
    def end_cursor(self) -> str | None:
        return self.cursor_of(self.rows[-1]) if self.rows else None


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node's ledger row with what its agent reported."""

    id: str
    hostname: str
    resource_group: str
    capacity: ResourceSlots
    used: ResourceSlots
    allocations: int
    cordoned: bool
    lost: bool
    reason: str
    updated_at: datetime
    seq: int
    backend: str | None
    """From the machine's agent; None until it has registered."""
    epoch: int | None
    devices: tuple[dict[str, object], ...]
    images: tuple[str, ...]
    pulls: dict[str, dict[str, object]] = field(default_factory=dict)
    """Image pulls in flight: reference -> done_bytes, total_bytes, since, kernels."""


def encode_cursor(created_seq: int, kind: str = _CURSOR) -> str:
    """A Relay cursor: the row's creation sequence behind the ``kind`` of list it pages."""
    return base64.urlsafe_b64encode(f"{kind}{created_seq}".encode()).decode()


def decode_cursor(cursor: str, kind: str = _CURSOR) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidCursorError(f"cursor {cursor[:40]!r} is not valid") from None
    if not text.startswith(kind) or not text[len(kind) :].isdigit():
        raise InvalidCursorError(f"cursor {cursor[:40]!r} is not valid")
    return int(text[len(kind) :])


async def list_sessions(
    engine: AsyncEngine,
    *,
    first: int = 20,
    after: str | None = None,
    status: Statuses = None,
    domain: str | None = None,
    user_id: str | None = None,
    project_id: str | None = None,
    project: str | None = None,
    owner_id: str | None = None,
    with_history: bool = False,
    newest_first: bool = False,
) -> SessionPage:
    """Sessions in the order they were requested (``newest_first``: the reverse), ``first`` of
    them after the ``after`` cursor. A keyset on the creating event's seq: stable while new
    sessions arrive, and an index range scan however deep the page. Every filter narrows the
    same keyset, so cursors stay valid under any of them; a cursor pages only the order it
    came from. ``domain``, ``user_id`` and ``project_id`` are the owner's: sessions from
    before tenancy match none of them."""
    if not 1 <= first <= MAX_PAGE:
        raise ValueError(f"first must be between 1 and {MAX_PAGE}, got {first}")
    t = session_tables.tables().sessions
    kind = _NEWEST_CURSOR if newest_first else _CURSOR
    order = t.c.created_seq.desc() if newest_first else t.c.created_seq
    query = select(t).order_by(order).limit(first + 1)
    if after is not None:
        mark = decode_cursor(after, kind)
        query = query.where(t.c.created_seq < mark if newest_first else t.c.created_seq > mark)
    query = _narrowed(
        query,
        status,
        domain=domain,
        user_id=user_id,
        project_id=project_id,
        project=project,
        owner_id=owner_id,
    )
    async with engine.connect() as conn:
        records = [session_tables.from_row(r) for r in await conn.execute(query)]
        has_next = len(records) > first
        records = records[:first]
        history = await _history(conn, [r.id for r in records]) if with_history else {}
    rows = [SessionView(r, history.get(r.id, ())) for r in records]
    return SessionPage(rows, has_next, newest_first)


Statuses = SessionStatus | str | Sequence[SessionStatus | str] | None


def _narrowed(query: Select[_T], status: Statuses, **owner: str | None) -> Select[_T]:
    """``query`` on the sessions table narrowed to ``status`` (one or several) and the owner
    columns given (None: any)."""
    t = session_tables.tables().sessions
    if status is not None:
        wanted = [status] if isinstance(status, str) else list(status)
        query = query.where(t.c.status.in_([SessionStatus(s).value for s in wanted]))
    for column, value in owner.items():
        if value is not None:
            query = query.where(t.c[column] == value)
    return query


async def count_sessions(
    engine: AsyncEngine,
    *,
    status: Statuses = None,
    domain: str | None = None,
    user_id: str | None = None,
) -> int:
    """How many sessions ``list_sessions`` with the same filters pages through."""
    t = session_tables.tables().sessions
    query = _narrowed(select(func.count()).select_from(t), status, domain=domain, user_id=user_id)
    async with engine.connect() as conn:
        return int(await conn.scalar(query) or 0)


async def get_session(engine: AsyncEngine, session_id: str) -> SessionView | None:
    """One session with its status history, read in one transaction."""
    found = await get_sessions(engine, [session_id])
    return found[0] if found else None


async def get_sessions(engine: AsyncEngine, session_ids: Sequence[str]) -> list[SessionView]:
    """The sessions among ``session_ids`` that exist, each with its status history, in the
    order asked; read in one transaction."""
    if not session_ids:
        return []
    t = session_tables.tables().sessions
    async with engine.connect() as conn, conn.begin():
        rows = (await conn.execute(select(t).where(t.c.id.in_(list(session_ids))))).all()
        history = await _history(conn, [r.id for r in rows])
    by_id = {r.id: session_tables.from_row(r) for r in rows}
    return [
        SessionView(by_id[i], history.get(i, ())) for i in dict.fromkeys(session_ids) if i in by_id
    ]


async def _history(
    conn: AsyncConnection, ids: list[str]
) -> dict[str, tuple[session_tables.StatusEntry, ...]]:
    if not ids:
        return {}
    h = session_tables.tables().history
    query = select(h).where(h.c.session_id.in_(ids)).order_by(h.c.session_id, h.c.seq)
    out: dict[str, list[session_tables.StatusEntry]] = {}
    for r in await conn.execute(query):
        out.setdefault(r.session_id, []).append(session_tables.entry_from_row(r))
    return {k: tuple(v) for k, v in out.items()}


def _nodes_query(
    resource_group: str | None, node_ids: Sequence[str] | None = None
) -> Select[tuple[object, ...]]:
    n, a = nodes.tables().nodes, agents.tables()
    query = select(n, a.c.backend, a.c.epoch, a.c.devices, a.c.images, a.c.pulls).outerjoin(
        a, a.c.id == n.c.id
    )
    if resource_group is not None:
        query = query.where(n.c.resource_group == resource_group)
    if node_ids is not None:
        query = query.where(n.c.id.in_(list(node_ids)))
    return query.order_by(n.c.resource_group, n.c.hostname)


async def node_stamps(engine: AsyncEngine) -> dict[str, tuple[int, int]]:
    """Every node's id -> (its ledger row's last change, its agent row's; 0: none): what moves
    whenever ``list_nodes`` would answer otherwise for it, read without the rows' JSON."""
    n, a = nodes.tables().nodes, agents.tables()
    query = select(n.c.id, n.c.last_seq, a.c.last_seq).outerjoin(a, a.c.id == n.c.id)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    return {row[0]: (int(row[1]), int(row[2] or 0)) for row in rows}


async def list_nodes(
    engine: AsyncEngine, *, resource_group: str | None = None,
    node_ids: Sequence[str] | None = None,
) -> list[NodeView]:  # fmt: skip
    """Every node (of one resource group, or of those ids, if given), by group and host name."""
    async with engine.connect() as conn:
        rows = (await conn.execute(_nodes_query(resource_group, node_ids))).all()
    return [
        NodeView(
            id=r.id,
            hostname=r.hostname,
            resource_group=r.resource_group,
            capacity=slots_from(r),
            used=slots_from(r, "used_"),
            allocations=r.allocations,
            cordoned=r.cordoned,
            lost=r.lost,
            reason=r.reason,
            updated_at=r.updated_at,
            seq=r.last_seq,
            backend=r.backend,
            epoch=r.epoch,
            devices=tuple(r.devices or ()),
            images=tuple(r.images or ()),
            pulls=dict(r.pulls or {}),
        )
        for r in rows
    ]


async def position(engine: AsyncEngine) -> int:
    """How far every view has read the log: the lowest stored position (0 if none yet)."""
    query = select(func.min(positions.c.position)).where(
        positions.c.view.in_([v.name for v in VIEWS])
    )
    async with engine.connect() as conn:
        found = await conn.scalar(query)
    return int(found or 0)


async def wait_for_position(
    engine: AsyncEngine, seq: int, timeout: float, *, poll: float = 0.01
) -> bool:
    """Read-your-writes from another process than the projector: poll the stored position
    until it reaches ``seq`` (the sequence an outcome returned) or ``timeout`` passes. Every
    10 ms while someone waits (one indexed read of a few rows): a live page's change and a
    mutation's answer wait for the views no longer than they must."""
    deadline = time.monotonic() + timeout
    while await position(engine) < seq:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(poll)
    return True


async def waiting_owners(engine: AsyncEngine, resource_group: str) -> set[tuple[str, str, str]]:
    """(domain, project id, user id) of every owner with an admitted session waiting in
    ``resource_group``: fair share's active siblings (a session from before tenancy counts
    under its tenant's domain and project)."""
    t = session_tables.tables().sessions
    query = (
        select(t.c.domain, t.c.project_id, t.c.user_id, t.c.project)
        .where(
            t.c.status == SessionStatus.PENDING.value,
            t.c.admitted.is_(True),
            t.c.resource_group == resource_group,
        )
        .distinct()
    )
    async with engine.connect() as conn:
        rows = await conn.execute(query)
        return {(r.domain or "", r.project_id or r.project or "", r.user_id or "") for r in rows}
