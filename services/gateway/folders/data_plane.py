"""``vfolderAccess``: a short-lived token for one data-plane operation on one folder, signed
with the key the storage service checks (``schemas/folder_tokens.py``), and the URL to send it
to. The permission an operation needs: download, list and archive ``ro``; upload, mkdir and
move ``rw``; delete ``rwd``; the folder must be ready. An upload token is one-use and carries
``max_bytes``: the least of the size asked for, the folder quota left and the owner's policy
total (``max_quota_scope_size_bytes``) left; an upload that cannot fit is refused here. Reads
the vfolders view and the directory; writes nothing."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import Principal
from projections.folders.tables import FolderRecord
from schemas.folder_paths import UnsafePath, parse_path
from schemas.folder_tokens import Claims, Operation, issue
from schemas.tenancy import PolicyKind, policy_id_for
from schemas.vfolder import FolderStatus, OwnerKind, Permission
from services.gateway.context import Context, ctx_of, forbidden, invalid, who
from services.gateway.core.folder_lookup import permission, visible_folder
from services.gateway.folders.mutations import whole_bytes
from services.gateway.folders.queries import choice
from services.gateway.folders.types import VFolderAccess

NEEDS = {
    Operation.DOWNLOAD: Permission.READ_ONLY,
    Operation.LIST: Permission.READ_ONLY,
    Operation.ARCHIVE: Permission.READ_ONLY,
    Operation.UPLOAD: Permission.READ_WRITE,
    Operation.MKDIR: Permission.READ_WRITE,
    Operation.MOVE: Permission.READ_WRITE,
    Operation.DELETE: Permission.READ_WRITE_DELETE,
}
ROUTES = {op: op.value for op in Operation} | {Operation.UPLOAD: "uploads"}
"""The data plane's route of each operation, under ``/folders/<volume>/<folder id>/``."""
CREATING = frozenset({Operation.UPLOAD, Operation.MKDIR})
"""Operations whose path names something new: its last name must be NFC."""


def quota_error(message: str) -> GraphQLError:
    return GraphQLError(message, extensions={"code": "quota-exceeded"})


def policy_total(ctx: Context, record: FolderRecord) -> int | None:
    """The owner's storage policy total across their folders, if it sets one."""
    directory = ctx.directory
    owner = (
        directory.users.get(record.owner_id)
        if record.owner_kind is OwnerKind.USER
        else directory.projects.get(record.owner_id)
    )
    if owner is None:
        return None
    kind = PolicyKind.USER if record.owner_kind is OwnerKind.USER else PolicyKind.PROJECT
    policy = directory.policies.get(policy_id_for(kind, owner.policy))
    storage = policy.storage if policy is not None else None
    return storage.max_quota_scope_size_bytes if storage is not None else None


async def upload_room(ctx: Context, record: FolderRecord, size: int | None) -> int | None:
    """The largest upload the folder takes now (None: no limit); refuses a ``size`` that
    cannot fit, saying which limit."""
    room: list[int] = []
    if size is not None:
        room.append(size)
    if record.quota_bytes is not None:
        left = max(0, record.quota_bytes - record.bytes_used)
        if size is not None and size > left:
            raise quota_error(
                f"folder {record.name} has a quota of {record.quota_bytes} bytes and holds "
                f"{record.bytes_used}: an upload of {size} bytes does not fit"
            )
        room.append(left)
    total = policy_total(ctx, record)
    if total is not None:
        used = await ctx.views.folders.owner_bytes(record.owner_kind, record.owner_id)
        left = max(0, total - used)
        if size is not None and size > left:
            raise quota_error(
                f"the owner's storage policy allows {total} bytes across their folders, which "
                f"hold {used}: an upload of {size} bytes does not fit"
            )
        room.append(left)
    largest = min(room, default=None)
    if largest == 0 and size != 0:
        raise quota_error(f"folder {record.name} has no room left for an upload")
    return largest


def check_permission(info: Info[Context, Any], record: FolderRecord, op: Operation) -> None:
    me: Principal = who(info)
    held = permission(record, me)
    needed = NEEDS[op]
    if held is None or not held.allows(needed):
        have = "no permission" if held is None else f"permission {held.value}"
        raise forbidden(
            info,
            f"{op.value} needs permission {needed.value} on folder {record.name}; you have {have}",
        )


@strawberry.type
class VFolderAccessMutation:
    @strawberry.mutation(
        name="vfolderAccess",
        description="A short-lived token for one data-plane operation on a folder (upload, "
        "download, list, archive, mkdir, move, delete) on `path` (or, with `prefix`, beneath "
        "it), and the URL to send it to. Uploads: one-use; `size` is the upload's length.",
    )
    async def vfolder_access(
        self,
        info: Info[Context, Any],
        id: str,
        operation: str,
        path: str = "",
        size: float | None = None,
        prefix: bool = False,
    ) -> VFolderAccess:
        ctx = ctx_of(info)
        who(info)
        key = ctx.settings.storage_token_key
        if key is None:
            raise GraphQLError(
                "this gateway has no storage key (JETYARD_GATEWAY_STORAGE_TOKEN_KEY): it cannot "
                "grant access to folders' files",
                extensions={"code": "unavailable"},
            )
        op = choice(Operation, "operation", operation)
        assert op is not None
        try:
            parse_path(path, creating=op in CREATING and not prefix)
        except UnsafePath as exc:
            raise invalid(exc.message) from exc
        length = whole_bytes(size, "size")
        record = await visible_folder(info, id)
        check_permission(info, record, op)
        if record.status is not FolderStatus.READY:
            raise GraphQLError(
                f"folder {record.name} is {record.status.value}: its files are not available",
                extensions={"code": "refused"},
            )
        max_bytes = await upload_room(ctx, record, length) if op is Operation.UPLOAD else None
        expires = int(time.time() + ctx.settings.storage_token_ttl_s)
        claims = Claims(
            op=op, volume=record.volume, folder=record.id, path=path, prefix=prefix,
            max_bytes=max_bytes, exp=expires, once=op is Operation.UPLOAD,
        )  # fmt: skip
        base = ctx.settings.storage_url.rstrip("/")
        return VFolderAccess(
            url=f"{base}/folders/{record.volume}/{record.id}/{ROUTES[op]}",
            token=issue(key.get_secret_value().encode(), claims),
            expires_at=datetime.fromtimestamp(expires, UTC),
            operation=op.value,
            path=path,
            max_bytes=max_bytes,
        )
