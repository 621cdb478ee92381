"""Commands on virtual folders (``cmd.vfolder.<verb>``), decided by the storage service. The
person acting is the command's authenticated ``actor``; a folder is named by its id (a new
folder's id derives from the command id, so a command sent twice creates one folder)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from commands.messages import Command
from schemas.ids import Token, derived_id
from schemas.subjects import AggregateType
from schemas.vfolder import FOLDER_NAME_PATTERN, OwnerKind, Permission, UsageMode

VFOLDER = AggregateType.VFOLDER
FolderName = Annotated[str, Field(pattern=FOLDER_NAME_PATTERN)]
QuotaBytes = Annotated[int | None, Field(gt=0, lt=1 << 62)]
Reason = Annotated[str, Field(max_length=512)]


def folder_id_for(command_id: str) -> str:
    return derived_id("vfolder", command_id)


class CreateVFolder(Command):
    """A folder for the actor (``owner_kind: user``) or for one of their projects
    (``project``, named by ``project_id``), on ``volume`` (None: the default volume)."""

    aggregate_type, verb = VFOLDER, "create"
    name: FolderName
    owner_kind: OwnerKind = OwnerKind.USER
    project_id: Token | None = None
    volume: Token | None = None
    usage_mode: UsageMode = UsageMode.GENERAL
    quota_bytes: QuotaBytes = None

    @property
    def folder_id(self) -> str:
        return folder_id_for(self.command_id)


class RenameVFolder(Command):
    aggregate_type, verb = VFOLDER, "rename"
    folder_id: Token
    name: FolderName


class TrashVFolder(Command):
    aggregate_type, verb = VFOLDER, "trash"
    folder_id: Token
    reason: Reason = ""


class RestoreVFolder(Command):
    aggregate_type, verb = VFOLDER, "restore"
    folder_id: Token


class PurgeVFolder(Command):
    aggregate_type, verb = VFOLDER, "purge"
    folder_id: Token
    reason: Reason = ""


class InviteToVFolder(Command):
    aggregate_type, verb = VFOLDER, "invite"
    folder_id: Token
    user_id: Token
    permission: Permission = Permission.READ_ONLY


class AnswerVFolderInvitation(Command):
    """The invitee accepts (or declines) an invitation addressed to them."""

    aggregate_type, verb = VFOLDER, "answer"
    folder_id: Token
    accept: bool


class RevokeVFolderShare(Command):
    aggregate_type, verb = VFOLDER, "revoke"
    folder_id: Token
    user_id: Token


class LeaveVFolder(Command):
    aggregate_type, verb = VFOLDER, "leave"
    folder_id: Token


class SetVFolderQuota(Command):
    aggregate_type, verb = VFOLDER, "quota"
    folder_id: Token
    quota_bytes: QuotaBytes
