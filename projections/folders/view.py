"""The vfolders view: one row per virtual folder (name, owner, volume, status, quota, usage,
shares and invitations) and the folders live sessions mount.

Reads ``ev.vfolder.*`` (every ``VFolder*`` event) and, from ``ev.session.*``,
``SessionRequested`` (its ``mounts``, as admission resolved them) and the events that end a
session (``SessionTerminated``, ``SessionCancelled``, ``SessionFailed``): a session's mounts are
live from its request until it reaches a terminal status, requeues included. ``apply_folder``
and ``apply_mounts`` are pure; ``apply_batch`` loads the rows a batch touches in one query per
table and writes the differences back. Its tables and records are in
``projections.folders.tables``; its queries in ``projections.folders.queries``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import CATALOGUE
from events.domain.session import (
    SessionCancelled,
    SessionFailed,
    SessionRequested,
    SessionTerminated,
)
from events.domain.vfolder import (
    VFolderCloned,
    VFolderCloneFailed,
    VFolderCreated,
    VFolderInvitationAccepted,
    VFolderInvitationDeclined,
    VFolderInvited,
    VFolderLeft,
    VFolderPurged,
    VFolderQuotaSet,
    VFolderRenamed,
    VFolderRestored,
    VFolderShareChanged,
    VFolderShareRevoked,
    VFolderTrashed,
    VFolderUsageMeasured,
)
from events.envelope import StoredEvent
from projections.base import UNDECODABLE, View, skip_undecodable
from projections.db import sync_rows
from projections.folders.tables import (
    FolderRecord,
    MountRecord,
    from_row,
    member_rows,
    mount_from_row,
    mount_to_row,
    tables,
    to_row,
)
from schemas.subjects import AggregateType
from schemas.vfolder import FolderStatus

NAME = "vfolders"
VERSION = 2  # 2: links and others
FOLDER_EVENTS = (
    VFolderCreated, VFolderRenamed, VFolderCloned, VFolderCloneFailed, VFolderTrashed,
    VFolderRestored, VFolderPurged, VFolderInvited, VFolderInvitationAccepted,
    VFolderInvitationDeclined, VFolderShareChanged, VFolderShareRevoked, VFolderLeft,
    VFolderQuotaSet, VFolderUsageMeasured,
)  # fmt: skip
SESSION_ENDS = (SessionTerminated, SessionCancelled, SessionFailed)
EVENTS = frozenset(cls.event_name for cls in (*FOLDER_EVENTS, SessionRequested, *SESSION_ENDS))


def apply_folder(row: FolderRecord | None, event: StoredEvent) -> FolderRecord | None:
    """One event on one folder's row: the row after it (the same row when it changes
    nothing, e.g. because the row has seen the event already)."""
    if row is not None and event.seq <= row.last_seq:
        return row
    env = event.envelope
    payload = CATALOGUE.decode(env)
    if isinstance(payload, VFolderCreated):
        if row is not None:  # created once, forever
            return row
        return FolderRecord(
            id=env.aggregate_id, created_seq=event.seq, name=payload.name,
            owner_kind=payload.owner_kind, owner_id=payload.owner_id, domain=payload.domain,
            volume=payload.volume, usage_mode=payload.usage_mode,
            status=FolderStatus.CLONING if payload.cloned_from else FolderStatus.READY,
            quota_bytes=payload.quota_bytes, bytes_used=0, files=0, links=0, others=0,
            creator=payload.creator, cloned_from=payload.cloned_from,
            created_at=env.occurred_at, updated_at=env.occurred_at, last_seq=event.seq,
        )  # fmt: skip
    if row is None:  # a change to a folder this view never saw created
        return None
    changes = _changes(row, payload)
    if changes is None:
        return row
    return replace(row, updated_at=env.occurred_at, last_seq=event.seq, **changes)


def _changes(row: FolderRecord, payload: Any) -> dict[str, Any] | None:
    """What an event changes on a folder (as ``commands.folders.aggregate.VFolder`` applies it)."""
    shares, invitations = dict(row.shares), dict(row.invitations)
    match payload:
        case VFolderRenamed(name=name):
            return {"name": name}
        case VFolderCloned():
            return {"status": FolderStatus.READY, **_counts(payload)}
        case VFolderCloneFailed():
            return {"status": FolderStatus.CLONE_FAILED}
        case VFolderTrashed():
            return {"status": FolderStatus.TRASHED}
        case VFolderRestored():
            return {"status": FolderStatus.READY}
        case VFolderPurged():
            return {
                "status": FolderStatus.PURGED, "shares": {}, "invitations": {},
                "bytes_used": 0, "files": 0, "links": 0, "others": 0,
            }  # fmt: skip
        case VFolderInvited(user_id=user_id, permission=permission):
            invitations[user_id] = permission
        case VFolderInvitationAccepted(user_id=user_id):
            offered = invitations.pop(user_id, None)
            if offered is not None:
                shares[user_id] = offered
        case VFolderInvitationDeclined(user_id=user_id):
            invitations.pop(user_id, None)
        case VFolderShareChanged(user_id=user_id, permission=permission):
            shares[user_id] = permission
        case VFolderShareRevoked(user_id=user_id):
            shares.pop(user_id, None)
            invitations.pop(user_id, None)
        case VFolderLeft(user_id=user_id):
            shares.pop(user_id, None)
        case VFolderQuotaSet(quota_bytes=quota_bytes):
            return {"quota_bytes": quota_bytes}
        case VFolderUsageMeasured():
            return _counts(payload)
        case _:
            return None
    return {"shares": shares, "invitations": invitations}


def _counts(payload: VFolderCloned | VFolderUsageMeasured) -> dict[str, Any]:
    return {
        "bytes_used": payload.bytes_used, "files": payload.files,
        "links": payload.links, "others": payload.others,
    }  # fmt: skip


def apply_mounts(rows: list[MountRecord], event: StoredEvent) -> list[MountRecord]:
    """One session event on the folders that session mounts: a request records them (once),
    the session's end makes them no longer live."""
    env = event.envelope
    payload = CATALOGUE.decode(env)
    if isinstance(payload, SessionRequested):
        if rows:  # requested once, forever: the mounts are recorded already
            return rows
        read_only: dict[str, bool] = {}
        for mount in payload.mounts:  # none in logs from before mounts
            # One folder mounted at two paths is one row: read-only only if both are.
            read_only[mount.folder_id] = read_only.get(mount.folder_id, True) and mount.read_only
        return [
            MountRecord(env.aggregate_id, folder_id, ro, live=True, last_seq=event.seq)
            for folder_id, ro in read_only.items()
        ]
    if isinstance(payload, SESSION_ENDS):
        return [
            replace(m, live=False, last_seq=event.seq) if m.last_seq < event.seq else m
            for m in rows
        ]
    return rows


async def apply_batch(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    t = tables(suffix)
    folder_events = [e for e in events if e.envelope.aggregate_type is AggregateType.VFOLDER]
    session_events = [e for e in events if e.envelope.aggregate_type is AggregateType.SESSION]
    if folder_events:
        await _apply_folders(conn, suffix, folder_events)
    if session_events:
        ids = list({e.envelope.aggregate_id for e in session_events})
        found = await conn.execute(select(t.mounts).where(t.mounts.c.session_id.in_(ids)))
        before: dict[str, list[MountRecord]] = {}
        for row in found:
            before.setdefault(row.session_id, []).append(mount_from_row(row))
        after = dict(before)
        for event in session_events:
            sid = event.envelope.aggregate_id
            try:
                after[sid] = apply_mounts(after.get(sid, []), event)
            except UNDECODABLE as exc:
                skip_undecodable(NAME, event, exc)
        await sync_rows(conn, t.mounts, _mount_rows(before), _mount_rows(after))


def _mount_rows(by_session: dict[str, list[MountRecord]]) -> dict[Any, dict[str, Any]]:
    return {(m.session_id, m.folder_id): mount_to_row(m) for ms in by_session.values() for m in ms}


async def _apply_folders(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    t = tables(suffix)
    ids = list({e.envelope.aggregate_id for e in events})
    members: dict[str, list[Any]] = {}
    for member in await conn.execute(select(t.members).where(t.members.c.folder_id.in_(ids))):
        members.setdefault(member.folder_id, []).append(member)
    found = await conn.execute(select(t.folders).where(t.folders.c.id.in_(ids)))
    before = {row.id: from_row(row, members.get(row.id)) for row in found}
    after = dict(before)
    for event in events:
        fid = event.envelope.aggregate_id
        try:
            record = apply_folder(after.get(fid), event)
        except UNDECODABLE as exc:
            skip_undecodable(NAME, event, exc)
            continue
        if record is not None:
            after[fid] = record
    await sync_rows(
        conn,
        t.folders,
        {k: to_row(v) for k, v in before.items()},
        {k: to_row(v) for k, v in after.items()},
    )
    await sync_rows(
        conn,
        t.members,
        {k: r for v in before.values() for k, r in member_rows(v).items()},
        {k: r for v in after.values() for k, r in member_rows(v).items()},
    )


VIEW = View(NAME, VERSION, EVENTS, lambda suffix: tables(suffix).metadata, apply_batch)
