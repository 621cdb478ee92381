"""The endpoints view's queries: endpoints a page at a time (Relay keyset cursors, narrowed to
the caller's scope), one endpoint, and what hangs off one: its revisions, its replicas, its
tokens and its latest scaling decisions. Reads only the view's tables; no subjects."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from projections import queries
from projections.endpoints.tables import (
    EndpointRecord,
    ReplicaRecord,
    RevisionRecord,
    ScalingRecord,
    TokenRecord,
    from_row,
    replica_from_row,
    revision_from_row,
    scaling_from_row,
    tables,
    token_from_row,
)
from schemas.serving import EndpointStatus, ReplicaLifecycle

MAX_PAGE = 500
MAX_HISTORY = 1000
_CURSOR = "endpoint:"
_ENDED = tuple(s.value for s in ReplicaLifecycle if s.has_ended)


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose endpoints a caller may list: everything (``Scope()``), a domain's, or one
    person's (the owner's user id)."""

    domain: str | None = None
    user_id: str | None = None


@dataclass(frozen=True, slots=True)
class EndpointPage:
    rows: list[EndpointRecord]
    has_next: bool
    total: int

    @property
    def end_cursor(self) -> str | None:
        return encode_cursor(self.rows[-1].created_seq) if self.rows else None


def encode_cursor(created_seq: int) -> str:
    return queries.encode_cursor(created_seq, _CURSOR)


def decode_cursor(cursor: str) -> int:
    return queries.decode_cursor(cursor, _CURSOR)


async def list_endpoints(
    engine: AsyncEngine,
    *,
    scope: Scope,
    first: int = 50,
    after: str | None = None,
    destroyed: bool = False,
) -> EndpointPage:
    """Endpoints in the order they were (last) created, ``first`` of them after the ``after``
    cursor, with how many match in all; destroyed ones only when ``destroyed``."""
    if not 1 <= first <= MAX_PAGE:
        raise ValueError(f"first must be between 1 and {MAX_PAGE}, got {first}")
    e = tables().endpoints
    query: Select[tuple[object, ...]] = select(e)
    if scope.domain is not None:
        query = query.where(e.c.domain == scope.domain)
    if scope.user_id is not None:
        query = query.where(e.c.user_id == scope.user_id)
    if not destroyed:
        query = query.where(e.c.status != EndpointStatus.DESTROYED.value)
    counted = select(func.count()).select_from(query.subquery())
    if after is not None:
        query = query.where(e.c.created_seq > decode_cursor(after))
    query = query.order_by(e.c.created_seq).limit(first + 1)
    async with engine.connect() as conn, conn.begin():
        total = int(await conn.scalar(counted) or 0)
        rows = (await conn.execute(query)).all()
    records = [from_row(row) for row in rows]
    return EndpointPage(records[:first], len(records) > first, total)


async def get_endpoint(engine: AsyncEngine, endpoint_id: str) -> EndpointRecord | None:
    e = tables().endpoints
    async with engine.connect() as conn:
        row = (await conn.execute(select(e).where(e.c.id == endpoint_id))).first()
    return None if row is None else from_row(row)


async def revisions(engine: AsyncEngine, endpoint_id: str) -> list[RevisionRecord]:
    """Every revision, newest first."""
    r = tables().revisions
    query = select(r).where(r.c.endpoint_id == endpoint_id).order_by(r.c.revision.desc())
    async with engine.connect() as conn:
        return [revision_from_row(row) for row in await conn.execute(query)]


async def replicas(engine: AsyncEngine, endpoint_id: str, *, ended: int = 0) -> list[ReplicaRecord]:
    """The replicas that have not ended, and the ``ended`` latest that have, by number."""
    r = tables().replicas
    mine = r.c.endpoint_id == endpoint_id
    live = select(r).where(mine, r.c.lifecycle.not_in(_ENDED))
    gone = select(r).where(mine, r.c.lifecycle.in_(_ENDED)).order_by(r.c.replica.desc())
    async with engine.connect() as conn, conn.begin():
        found = [replica_from_row(row) for row in await conn.execute(live)]
        if ended > 0:
            found += [replica_from_row(row) for row in await conn.execute(gone.limit(ended))]
    return sorted(found, key=lambda replica: replica.replica)


async def tokens(engine: AsyncEngine, endpoint_id: str) -> list[TokenRecord]:
    """Its tokens, in the order they were issued (never a secret: the view has none)."""
    t = tables().tokens
    query = select(t).where(t.c.endpoint_id == endpoint_id).order_by(t.c.issued_at, t.c.token_id)
    async with engine.connect() as conn:
        return [token_from_row(row) for row in await conn.execute(query)]


async def scalings(engine: AsyncEngine, endpoint_id: str, *, last: int) -> list[ScalingRecord]:
    """The ``last`` latest scaling decisions, newest first."""
    if not 1 <= last <= MAX_HISTORY:
        raise ValueError(f"last must be between 1 and {MAX_HISTORY}, got {last}")
    s = tables().scalings
    query = select(s).where(s.c.endpoint_id == endpoint_id).order_by(s.c.seq.desc()).limit(last)
    async with engine.connect() as conn:
        return [scaling_from_row(row) for row in await conn.execute(query)]
