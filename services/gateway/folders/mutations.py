"""The GraphQL folder mutations: create, rename, clone, trash, restore, purge, share
(invite, answer, revoke, leave) and quota. Each resolves the folder the caller names (one they
cannot see is not found and nothing is sent), sends its ``cmd.vfolder.<verb>`` command, waits a
bounded time for the outcome and for the views to hold it, and answers with the folder as the
views then hold it. The storage service decides (``services/storage/control/rules.py``).
Writes ``cmd.vfolder.*``; reads ``out.<command id>``, the vfolders view and the directory."""

from __future__ import annotations

from typing import Any, TypeVar

import strawberry
from graphql import GraphQLError
from pydantic import ValidationError
from strawberry.types import Info

from commands.authorisation import Principal
from commands.folders.messages import (
    AnswerVFolderInvitation,
    CloneVFolder,
    CreateVFolder,
    FolderCommand,
    InviteToVFolder,
    LeaveVFolder,
    PurgeVFolder,
    RenameVFolder,
    RestoreVFolder,
    RevokeVFolderShare,
    SetVFolderQuota,
    TrashVFolder,
)
from commands.messages import Command, explain
from schemas.tenancy import email_digest, user_id_for
from schemas.vfolder import OwnerKind, Permission, UsageMode
from services.gateway.context import Context, ctx_of, forbidden, invalid, who
from services.gateway.core.folder_lookup import visible, visible_folder
from services.gateway.core.outcomes import read_your_writes
from services.gateway.core.types import OutcomeStatus
from services.gateway.folders.queries import choice, project_ref
from services.gateway.folders.types import VFolder, VFolderOutcome

C = TypeVar("C", bound=Command)


@strawberry.input
class CreateVFolderInput:
    name: str
    owner_kind: str = strawberry.field(default="user", description="user | project")
    project: str | None = strawberry.field(
        default=None, description="for a project folder: the project's name (or id)"
    )
    volume: str | None = strawberry.field(default=None, description="default: the default one")
    usage_mode: str = strawberry.field(default="general", description="general | data | model")
    quota_bytes: float | None = strawberry.field(default=None, description="null: no quota")
    client_command_id: str | None = strawberry.field(
        default=None, description="idempotency key: the same id never creates a second folder"
    )


MAX_BYTES = 1 << 62
"""As the commands' byte counts (``commands.folders.messages.QuotaBytes``)."""


def whole_bytes(value: float | None, what: str) -> int | None:
    """A byte count given as a GraphQL Float: a whole number, or an ``invalid`` error."""
    if value is None:
        return None
    if not float(value).is_integer() or not 0 <= value < MAX_BYTES:
        raise invalid(f"{what} must be a whole number of bytes below 2^62, got {value}")
    return int(value)


def acting(info: Info[Context, Any]) -> Principal:
    me = who(info)
    if me.read_only:
        raise forbidden(info, f"{me.role.value}s read folders; they do not change them")
    return me


def build(cls: type[C], me: Principal, **fields: Any) -> C:
    """The command on behalf of ``me``; bad input is an ``invalid`` error, nothing is sent."""
    try:
        return cls(actor=me.actor, tenant=me.tenant(fields.get("project_id")), **fields)
    except ValidationError as exc:
        raise invalid(explain(exc)) from exc


async def send(info: Info[Context, Any], cmd: Command, folder_id: str) -> VFolderOutcome:
    """Execute ``cmd``; a rejection is a GraphQL error carrying its code and command id."""
    ctx = ctx_of(info)
    outcome = await ctx.commands.execute(cmd, timeout=ctx.settings.command_timeout_s)
    await read_your_writes(ctx, outcome)
    if outcome is not None and not outcome.accepted:
        raise GraphQLError(
            outcome.message, extensions={"code": outcome.code, "commandId": cmd.command_id}
        )
    record = await ctx.views.folders.get(folder_id)
    folder = VFolder.of(record) if record is not None and visible(record, who(info)) else None
    if outcome is None:
        return VFolderOutcome(
            command_id=strawberry.ID(cmd.command_id), status=OutcomeStatus.PENDING, code=None,
            message="not decided yet: ask commandOutcome(id) later", folder=folder,
        )  # fmt: skip
    return VFolderOutcome(
        command_id=strawberry.ID(cmd.command_id), status=OutcomeStatus.ACCEPTED, code=None,
        message=outcome.message, folder=folder,
    )  # fmt: skip


async def on_folder(
    info: Info[Context, Any], id: str, cls: type[FolderCommand], **fields: Any
) -> VFolderOutcome:
    """Send ``cls`` about the folder ``id`` names for the caller, who must not be a monitor
    and must see the folder."""
    me = acting(info)
    folder = await visible_folder(info, id)
    return await send(info, build(cls, me, folder_id=folder.id, **fields), folder.id)


def user_ref(ctx: Context, ref: str) -> str:
    """A user id, or the id of the person with that email address."""
    if "@" in ref:
        return user_id_for(email_digest(ref, ctx.services.email_key))
    return ref


@strawberry.type
class VFolderMutation:
    @strawberry.mutation(name="createVFolder", description="A new folder, yours or a project's.")
    async def create_vfolder(
        self, info: Info[Context, Any], input: CreateVFolderInput
    ) -> VFolderOutcome:
        me = acting(info)
        ctx = ctx_of(info)
        kind = choice(OwnerKind, "ownerKind", input.owner_kind)
        project_id = None
        if input.project is not None:
            project_id = project_ref(ctx, me.domain, input.project)
        elif kind is OwnerKind.PROJECT:
            raise invalid("a project folder names its project (input.project)")
        extra = {} if input.client_command_id is None else {"command_id": input.client_command_id}
        cmd = build(
            CreateVFolder, me, name=input.name, owner_kind=kind,
            project_id=project_id, volume=input.volume,
            usage_mode=choice(UsageMode, "usageMode", input.usage_mode),
            quota_bytes=whole_bytes(input.quota_bytes, "quotaBytes"), **extra,
        )  # fmt: skip
        return await send(info, cmd, cmd.folder_id)

    @strawberry.mutation(name="renameVFolder")
    async def rename_vfolder(self, info: Info[Context, Any], id: str, name: str) -> VFolderOutcome:
        return await on_folder(info, id, RenameVFolder, name=name)

    @strawberry.mutation(
        name="cloneVFolder",
        description="A copy of a folder you may read, as a new folder of yours (cloning until "
        "its files are copied).",
    )
    async def clone_vfolder(
        self,
        info: Info[Context, Any],
        id: str,
        name: str,
        volume: str | None = None,
        usage_mode: str | None = None,
    ) -> VFolderOutcome:
        me = acting(info)
        folder = await visible_folder(info, id)
        cmd = build(
            CloneVFolder, me, folder_id=folder.id, name=name, volume=volume,
            usage_mode=choice(UsageMode, "usageMode", usage_mode),
        )  # fmt: skip
        return await send(info, cmd, cmd.clone_id)

    @strawberry.mutation(name="trashVFolder", description="Into the trash (restorable).")
    async def trash_vfolder(
        self, info: Info[Context, Any], id: str, reason: str = ""
    ) -> VFolderOutcome:
        return await on_folder(info, id, TrashVFolder, reason=reason)

    @strawberry.mutation(name="restoreVFolder", description="Out of the trash.")
    async def restore_vfolder(self, info: Info[Context, Any], id: str) -> VFolderOutcome:
        return await on_folder(info, id, RestoreVFolder)

    @strawberry.mutation(
        name="purgeVFolder", description="Delete a trashed folder's files for good."
    )
    async def purge_vfolder(
        self, info: Info[Context, Any], id: str, reason: str = ""
    ) -> VFolderOutcome:
        return await on_folder(info, id, PurgeVFolder, reason=reason)

    @strawberry.mutation(
        name="inviteToVFolder",
        description="Offer a share (ro | rw | rwd) to a person of the folder's domain, named by "
        "email or user id; a sharer's permission changes at once.",
    )
    async def invite_to_vfolder(
        self, info: Info[Context, Any], id: str, user: str, permission: str = "ro"
    ) -> VFolderOutcome:
        me = acting(info)
        ctx = ctx_of(info)
        folder = await visible_folder(info, id)
        invitee = ctx.directory.users.get(user_ref(ctx, user))
        if invitee is None or invitee.domain != folder.domain:
            raise GraphQLError(
                f"there is no user {user[:80]!r} in domain {folder.domain}",
                extensions={"code": "not-found"},
            )
        cmd = build(
            InviteToVFolder, me, folder_id=folder.id, user_id=str(invitee.id),
            permission=choice(Permission, "permission", permission),
        )  # fmt: skip
        return await send(info, cmd, folder.id)

    @strawberry.mutation(name="answerVFolderInvitation", description="Accept or decline.")
    async def answer_vfolder_invitation(
        self, info: Info[Context, Any], id: str, accept: bool
    ) -> VFolderOutcome:
        return await on_folder(info, id, AnswerVFolderInvitation, accept=accept)

    @strawberry.mutation(
        name="revokeVFolderShare", description="Take back a share or an invitation."
    )
    async def revoke_vfolder_share(
        self, info: Info[Context, Any], id: str, user: str
    ) -> VFolderOutcome:
        me = acting(info)
        ctx = ctx_of(info)
        folder = await visible_folder(info, id)
        cmd = build(RevokeVFolderShare, me, folder_id=folder.id, user_id=user_ref(ctx, user))
        return await send(info, cmd, folder.id)

    @strawberry.mutation(name="leaveVFolder", description="Give up a share you hold.")
    async def leave_vfolder(self, info: Info[Context, Any], id: str) -> VFolderOutcome:
        return await on_folder(info, id, LeaveVFolder)

    @strawberry.mutation(
        name="setVFolderQuota", description="A folder's quota in bytes; null: no folder quota."
    )
    async def set_vfolder_quota(
        self, info: Info[Context, Any], id: str, quota_bytes: float | None
    ) -> VFolderOutcome:
        me = acting(info)
        folder = await visible_folder(info, id)
        cmd = build(
            SetVFolderQuota, me, folder_id=folder.id,
            quota_bytes=whole_bytes(quota_bytes, "quotaBytes"),
        )  # fmt: skip
        return await send(info, cmd, folder.id)
