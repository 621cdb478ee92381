"""GraphQL object types of virtual folders: the folder (built from the vfolders view's
``FolderRecord`` by ``VFolder.of``, the only place its fields meet their GraphQL names), its
shares, a page of folders, a folder command's outcome and a data-plane access grant.

Byte counts are ``Float``: GraphQL's ``Int`` stops at 2^31, and a ``Float`` holds whole numbers
exactly up to 2^53 (8 PiB)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.types import Info

from projections.folders.queries import encode_cursor
from projections.folders.tables import FolderRecord
from services.gateway.context import Context, ctx_of, who
from services.gateway.core.folder_lookup import manages, permission
from services.gateway.core.types import OutcomeStatus, PageInfo
from services.gateway.core.views import Views


@strawberry.type
class VFolderShare:
    user_id: strawberry.ID
    permission: str = strawberry.field(description="ro | rw | rwd")


async def _mounted_by(root: VFolder, info: Info[Context, Any]) -> list[str]:
    if not manages(root.record, who(info)):
        return []
    views = root.past or ctx_of(info).views
    found = await views.folders.mounted_by([root.record.id])
    return found.get(root.record.id, [])


def _permission(root: VFolder, info: Info[Context, Any]) -> str | None:
    held = permission(root.record, who(info))
    return None if held is None else held.value


@strawberry.type(name="VFolder")
class VFolder:
    id: strawberry.ID
    name: str
    owner_kind: str = strawberry.field(description="user | project")
    owner_id: str = strawberry.field(description="the owning user's or project's id")
    domain: str
    volume: str
    usage_mode: str = strawberry.field(description="general | data | model")
    status: str = strawberry.field(description="ready | cloning | clone-failed | trashed | purged")
    quota_bytes: float | None = strawberry.field(description="null: no folder quota")
    bytes_used: float = strawberry.field(
        description="as last measured by the storage service: apparent sizes of its regular "
        "files, a file with several names (hard links) once"
    )
    files: float = strawberry.field(
        description="names of regular files (a file with two names counts two)"
    )
    links: float = strawberry.field(description="symlinks")
    other_entries: float = strawberry.field(
        description="entries that are neither files, symlinks nor directories (FIFOs, sockets, "
        "devices)"
    )
    cloned_from: str | None = strawberry.field(description="the folder it was cloned from")
    created_at: datetime
    updated_at: datetime
    shares: list[VFolderShare] = strawberry.field(description="accepted shares")
    invitations: list[VFolderShare] = strawberry.field(description="shares offered, not answered")
    record: strawberry.Private[FolderRecord]
    permission: str | None = strawberry.field(
        resolver=_permission,
        description="what the caller may do with its files: ro | rw | rwd; null: nothing "
        "(an invitation not yet accepted, a monitor)",
    )
    mounted_by: list[str] = strawberry.field(
        resolver=_mounted_by,
        description="ids of the live sessions mounting it (its owner and admins only; "
        "empty for anyone else)",
    )
    past: strawberry.Private[Views | None] = None
    """The past's views it was read from (``asOf``), which its other fields read too."""

    @classmethod
    def of(cls, record: FolderRecord, past: Views | None = None) -> VFolder:
        return cls(
            id=strawberry.ID(record.id),
            name=record.name,
            owner_kind=record.owner_kind.value,
            owner_id=record.owner_id,
            domain=record.domain,
            volume=record.volume,
            usage_mode=record.usage_mode.value,
            status=record.status.value,
            quota_bytes=record.quota_bytes,
            bytes_used=record.bytes_used,
            files=record.files,
            links=record.links,
            other_entries=record.others,
            cloned_from=record.cloned_from,
            created_at=record.created_at,
            updated_at=record.updated_at,
            shares=_shares(record.shares),
            invitations=_shares(record.invitations),
            record=record,
            past=past,
        )


def _shares(held: dict[str, Any]) -> list[VFolderShare]:
    return [
        VFolderShare(user_id=strawberry.ID(user_id), permission=held[user_id].value)
        for user_id in sorted(held)
    ]


@strawberry.type
class VFolderEdge:
    cursor: str
    node: VFolder

    @classmethod
    def of(cls, record: FolderRecord, past: Views | None = None) -> VFolderEdge:
        return cls(cursor=encode_cursor(record.created_seq), node=VFolder.of(record, past))


@strawberry.type
class VFolderConnection:
    edges: list[VFolderEdge]
    page_info: PageInfo
    total_count: int = strawberry.field(description="how many folders match, on every page")


@strawberry.type
class VFolderOutcome:
    command_id: strawberry.ID
    status: OutcomeStatus
    code: str | None
    message: str
    folder: VFolder | None = strawberry.field(
        description="the folder as the views hold it after the command (null if the caller "
        "no longer sees it, or not decided yet and unknown)"
    )


@strawberry.type
class VFolderAccess:
    url: str = strawberry.field(
        description="the data-plane URL of the operation; send the token as "
        "'Authorization: Bearer <token>' (or ?token=) and the path as ?path= where it takes one"
    )
    token: str
    expires_at: datetime
    operation: str
    path: str
    max_bytes: float | None = strawberry.field(
        description="uploads: the largest upload the token allows; null otherwise"
    )
