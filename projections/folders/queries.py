"""The vfolders view's queries: folders a page at a time (Relay keyset cursors, filters, and
the caller's scope), one folder, an owner's folders by name, an owner's total bytes, and the
live sessions mounting a folder. Reads only the view's tables (``vfolders``,
``vfolder_members``, ``vfolder_mounts``); no subjects."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Select, and_, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from projections import queries
from projections.folders.tables import FolderRecord, from_row, tables
from schemas.vfolder import FolderStatus, OwnerKind

MAX_PAGE = 500
_CURSOR = "vfolder:"


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose folders a caller may list: everything (``Scope()``), a domain's, or those a
    person reaches (their own, their projects', shared with or offered to them)."""

    domain: str | None = None
    user_id: str | None = None
    projects: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class FolderPage:
    rows: list[FolderRecord]
    has_next: bool
    total: int

    @property
    def end_cursor(self) -> str | None:
        return encode_cursor(self.rows[-1].created_seq) if self.rows else None


def encode_cursor(created_seq: int) -> str:
    return queries.encode_cursor(created_seq, _CURSOR)


def decode_cursor(cursor: str) -> int:
    return queries.decode_cursor(cursor, _CURSOR)


def _in_scope(scope: Scope) -> ColumnElement[bool] | None:
    t = tables()
    f, m = t.folders, t.members
    clauses: list[ColumnElement[bool]] = []
    if scope.domain is not None:
        clauses.append(f.c.domain == scope.domain)
    if scope.user_id is not None:
        reached = or_(
            and_(f.c.owner_kind == OwnerKind.USER.value, f.c.owner_id == scope.user_id),
            and_(f.c.owner_kind == OwnerKind.PROJECT.value, f.c.owner_id.in_(scope.projects))
            if scope.projects
            else false(),
            f.c.id.in_(select(m.c.folder_id).where(m.c.user_id == scope.user_id)),
        )
        clauses.append(reached)
    return and_(*clauses) if clauses else None


async def list_folders(
    engine: AsyncEngine,
    *,
    scope: Scope,
    first: int = 50,
    after: str | None = None,
    owner_kind: OwnerKind | None = None,
    owner_id: str | None = None,
    status: FolderStatus | None = None,
    name: str | None = None,
) -> FolderPage:
    """Folders in the order they were created, ``first`` of them after the ``after`` cursor,
    with how many match in all. Purged folders are left out unless ``status`` asks for them."""
    if not 1 <= first <= MAX_PAGE:
        raise ValueError(f"first must be between 1 and {MAX_PAGE}, got {first}")
    f = tables().folders
    query: Select[tuple[object, ...]] = select(f)
    where = _in_scope(scope)
    if where is not None:
        query = query.where(where)
    if status is None:
        query = query.where(f.c.status != FolderStatus.PURGED.value)
    else:
        query = query.where(f.c.status == status.value)
    if owner_kind is not None:
        query = query.where(f.c.owner_kind == owner_kind.value)
    if owner_id is not None:
        query = query.where(f.c.owner_id == owner_id)
    if name is not None:
        query = query.where(f.c.name == name)
    counted = select(func.count()).select_from(query.subquery())
    if after is not None:
        query = query.where(f.c.created_seq > decode_cursor(after))
    query = query.order_by(f.c.created_seq).limit(first + 1)
    async with engine.connect() as conn, conn.begin():
        total = int(await conn.scalar(counted) or 0)
        records = await _records(conn, query)
    return FolderPage(records[:first], len(records) > first, total)


async def _records(conn: AsyncConnection, query: Select[tuple[object, ...]]) -> list[FolderRecord]:
    rows = (await conn.execute(query)).all()
    m = tables().members
    members: dict[str, list[object]] = {}
    ids = [row.id for row in rows]
    if ids:
        for member in await conn.execute(select(m).where(m.c.folder_id.in_(ids))):
            members.setdefault(member.folder_id, []).append(member)
    return [from_row(row, members.get(row.id)) for row in rows]


async def get_folder(engine: AsyncEngine, folder_id: str) -> FolderRecord | None:
    f = tables().folders
    async with engine.connect() as conn, conn.begin():
        found = await _records(conn, select(f).where(f.c.id == folder_id))
    return found[0] if found else None


async def folders_named(
    engine: AsyncEngine,
    name: str,
    *,
    owners: Collection[tuple[OwnerKind, str]] = (),
    shared_with: str | None = None,
) -> list[FolderRecord]:
    """The folders called ``name`` (not purged) that one of ``owners`` owns or that are
    shared with ``shared_with`` (an accepted share), oldest first."""
    t = tables()
    f, m = t.folders, t.members
    reached: list[ColumnElement[bool]] = [
        and_(f.c.owner_kind == kind.value, f.c.owner_id == owner_id) for kind, owner_id in owners
    ]
    if shared_with is not None:
        shared = select(m.c.folder_id).where(m.c.user_id == shared_with, m.c.kind == "share")
        reached.append(f.c.id.in_(shared))
    if not reached:
        return []
    query = (
        select(f)
        .where(f.c.name == name, f.c.status != FolderStatus.PURGED.value, or_(*reached))
        .order_by(f.c.created_seq)
    )
    async with engine.connect() as conn, conn.begin():
        return await _records(conn, query)


async def owner_bytes(engine: AsyncEngine, owner_kind: OwnerKind, owner_id: str) -> int:
    """What an owner's folders that are not purged hold together (trashed ones count)."""
    f = tables().folders
    query = select(func.coalesce(func.sum(f.c.bytes_used), 0)).where(
        f.c.owner_kind == owner_kind.value,
        f.c.owner_id == owner_id,
        f.c.status != FolderStatus.PURGED.value,
    )
    async with engine.connect() as conn:
        return int(await conn.scalar(query) or 0)


async def mounted_by(engine: AsyncEngine, folder_ids: Sequence[str]) -> dict[str, list[str]]:
    """The live sessions mounting each folder, in session id order."""
    if not folder_ids:
        return {}
    mounts = tables().mounts
    query = (
        select(mounts.c.folder_id, mounts.c.session_id)
        .where(mounts.c.folder_id.in_(list(folder_ids)), mounts.c.live.is_(True))
        .order_by(mounts.c.folder_id, mounts.c.session_id)
    )
    out: dict[str, list[str]] = {}
    async with engine.connect() as conn:
        for row in await conn.execute(query):
            out.setdefault(row.folder_id, []).append(row.session_id)
    return out
