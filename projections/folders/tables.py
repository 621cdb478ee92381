"""The vfolders view's storage: its tables (``vfolders``, ``vfolder_members``,
``vfolder_mounts``), its read shapes (``FolderRecord``, ``MountRecord``) and the mapping between
rows and records. The fold that fills them is ``projections.folders.view``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import BigInteger, Boolean, Column, Index, MetaData, String, Table

from projections.db import UTCDateTime
from schemas.vfolder import FolderStatus, OwnerKind, Permission, UsageMode

SHARE = "share"
INVITATION = "invitation"


@dataclass(frozen=True, slots=True)
class VFolderTables:
    metadata: MetaData
    folders: Table
    members: Table
    mounts: Table


@lru_cache(maxsize=8)
def tables(suffix: str = "") -> VFolderTables:
    """The view's tables; a rebuild builds a second set under a suffix and swaps it in."""
    md = MetaData()
    folders = Table(
        f"vfolders{suffix}",
        md,
        Column("id", String(64), primary_key=True),
        Column("created_seq", BigInteger, nullable=False),  # the keyset for pagination
        Column("name", String(64), nullable=False),
        Column("owner_kind", String(16), nullable=False),
        Column("owner_id", String(64), nullable=False),
        Column("domain", String(64), nullable=False),
        Column("volume", String(64), nullable=False),
        Column("usage_mode", String(16), nullable=False),
        Column("status", String(16), nullable=False),
        Column("quota_bytes", BigInteger),
        Column("bytes_used", BigInteger, nullable=False),
        Column("files", BigInteger, nullable=False),
        Column("links", BigInteger, nullable=False),
        Column("others", BigInteger, nullable=False),
        Column("creator", String(64), nullable=False),
        Column("cloned_from", String(64)),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("last_seq", BigInteger, nullable=False),
    )
    Index(f"ix_{folders.name}_created", folders.c.created_seq, unique=True)
    # An owner's folders (a user's listing, a name lookup, the owner's total bytes).
    Index(f"ix_{folders.name}_owner", folders.c.owner_id, folders.c.owner_kind, folders.c.name)
    Index(f"ix_{folders.name}_domain", folders.c.domain, folders.c.created_seq)
    # Sharers and invitees, one row each: "shared with me" is an index lookup.
    members = Table(
        f"vfolder_members{suffix}",
        md,
        Column("folder_id", String(64), primary_key=True),
        Column("user_id", String(64), primary_key=True),
        Column("kind", String(16), nullable=False),  # share | invitation
        Column("permission", String(8), nullable=False),
    )
    Index(f"ix_{members.name}_user", members.c.user_id)
    # Folders a session mounts: live until the session reaches a terminal status.
    mounts = Table(
        f"vfolder_mounts{suffix}",
        md,
        Column("session_id", String(64), primary_key=True),
        Column("folder_id", String(64), primary_key=True),
        Column("read_only", Boolean, nullable=False),
        Column("live", Boolean, nullable=False),
        Column("last_seq", BigInteger, nullable=False),
    )
    Index(f"ix_{mounts.name}_folder", mounts.c.folder_id, mounts.c.live)
    return VFolderTables(md, folders, members, mounts)


@dataclass(frozen=True, slots=True)
class FolderRecord:
    """One folder of the view, and the view's one read shape: ``apply`` folds it, the queries
    return it (``projections.folders.queries``) and the gateway resolves GraphQL from it. Its
    fields are the ``vfolders`` columns, one for one, plus its shares and invitations (the
    ``vfolder_members`` rows)."""

    id: str
    created_seq: int
    name: str
    owner_kind: OwnerKind
    owner_id: str
    """A user id or a project id."""
    domain: str
    volume: str
    usage_mode: UsageMode
    status: FolderStatus
    quota_bytes: int | None
    bytes_used: int
    """As last measured (``VFolderUsageMeasured``): a file with several names once."""
    files: int
    """Names of regular files."""
    links: int
    """Symlinks."""
    others: int
    """Entries that are neither files, symlinks nor directories (FIFOs, sockets, devices)."""
    creator: str
    cloned_from: str | None
    created_at: datetime
    updated_at: datetime
    last_seq: int
    """The seq of the last event applied: older or repeated events change nothing."""
    shares: dict[str, Permission] = field(default_factory=dict)
    """User id -> what an accepted share allows."""
    invitations: dict[str, Permission] = field(default_factory=dict)
    """User id -> the permission offered, until accepted or declined."""


@dataclass(frozen=True, slots=True)
class MountRecord:
    """A session mounting a folder (a ``vfolder_mounts`` row)."""

    session_id: str
    folder_id: str
    read_only: bool
    live: bool
    last_seq: int


_COLUMNS = tuple(f.name for f in fields(FolderRecord) if f.name not in ("shares", "invitations"))
_ENUMS = {"owner_kind": OwnerKind, "usage_mode": UsageMode, "status": FolderStatus}


def to_row(record: FolderRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in _COLUMNS}
    for name in _ENUMS:
        row[name] = row[name].value
    return row


def member_rows(record: FolderRecord) -> dict[tuple[str, str], dict[str, Any]]:
    """The folder's ``vfolder_members`` rows, keyed by (folder id, user id)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for kind, held in ((INVITATION, record.invitations), (SHARE, record.shares)):
        for user_id, permission in held.items():
            out[(record.id, user_id)] = {
                "folder_id": record.id, "user_id": user_id, "kind": kind,
                "permission": permission.value,
            }  # fmt: skip
    return out


def from_row(row: Any, members: list[Any] | None = None) -> FolderRecord:
    values = {name: getattr(row, name) for name in _COLUMNS}
    for name, enum in _ENUMS.items():
        values[name] = enum(values[name])
    shares: dict[str, Permission] = {}
    invitations: dict[str, Permission] = {}
    for member in members or ():
        held = shares if member.kind == SHARE else invitations
        held[member.user_id] = Permission(member.permission)
    return FolderRecord(**values, shares=shares, invitations=invitations)


def mount_to_row(record: MountRecord) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(MountRecord)}


def mount_from_row(row: Any) -> MountRecord:
    return MountRecord(**{f.name: getattr(row, f.name) for f in fields(MountRecord)})
