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


class FolderCommand(Command):
    """A command on one existing folder (a base: each subclass names its verb)."""

    folder_id: Token


class RenameVFolder(FolderCommand):
    aggregate_type, verb = VFOLDER, "rename"
    name: FolderName


class TrashVFolder(FolderCommand):
    aggregate_type, verb = VFOLDER, "trash"
    reason: Reason = ""


class RestoreVFolder(FolderCommand):
    aggregate_type, verb = VFOLDER, "restore"


class PurgeVFolder(FolderCommand):
    aggregate_type, verb = VFOLDER, "purge"
    reason: Reason = ""


class InviteToVFolder(FolderCommand):
    aggregate_type, verb = VFOLDER, "invite"
    user_id: Token
    permission: Permission = Permission.READ_ONLY


class AnswerVFolderInvitation(FolderCommand):
    """The invitee accepts (or declines) an invitation addressed to them."""

    aggregate_type, verb = VFOLDER, "answer"
    accept: bool


class RevokeVFolderShare(FolderCommand):
    aggregate_type, verb = VFOLDER, "revoke"
    user_id: Token


class LeaveVFolder(FolderCommand):
    aggregate_type, verb = VFOLDER, "leave"


class SetVFolderQuota(FolderCommand):
    aggregate_type, verb = VFOLDER, "quota"
    quota_bytes: QuotaBytes


class CloneVFolder(FolderCommand):
    """A copy of ``folder_id`` (which the actor may at least read) as a new folder of the
    actor's own, called ``name``, on ``volume`` (None: the source's) with ``usage_mode``
    (None: the source's). The new folder is CLONING until its bytes are copied."""

    aggregate_type, verb = VFOLDER, "clone"
    name: FolderName
    volume: Token | None = None
    usage_mode: UsageMode | None = None

    @property
    def clone_id(self) -> str:
        return folder_id_for(self.command_id)
