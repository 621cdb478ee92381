"""The pure rules of the ``cmd.vfolder.*`` commands: who may do what to which folder, names
unique per owner, the owners' folder-count limits, and no purge of a folder a live session
mounts. No I/O, no clock: the folders, the tenancy directory and the mounts are handed in.

A folder another tenant cannot see answers exactly like one that does not exist (not-found),
as sessions do. Admins act on the folders of their domain; superadmins on all.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from commands.authorisation import Principal
from commands.directory import Directory
from commands.errors import DomainError
from commands.folders.access import administers, owns, permission_of, sees
from commands.folders.aggregate import VFolder
from commands.folders.index import Folders, Owner
from commands.folders.messages import (
    AnswerVFolderInvitation,
    CloneVFolder,
    CreateVFolder,
    InviteToVFolder,
    LeaveVFolder,
    PurgeVFolder,
    RenameVFolder,
    RestoreVFolder,
    RevokeVFolderShare,
    SetVFolderQuota,
    TrashVFolder,
)
from commands.outcome import Code, Rejected
from commands.unit_of_work import working_copy
from schemas.tenancy import PolicyKind, Role, policy_id_for
from schemas.vfolder import FolderStatus, OwnerKind, Permission


@dataclass(frozen=True, slots=True)
class Change:
    folder: VFolder
    message: str


Decision = Change | Rejected


@dataclass(frozen=True, slots=True)
class World:
    """What a decision reads: the folders, the directory, the volumes this service has, and
    which folders live sessions mount."""

    folders: Folders
    directory: Directory
    volumes: Collection[str]
    default_volume: str
    mounted: Callable[[str], bool] = lambda folder_id: False


def decide(cmd: Any, world: World, now: datetime) -> Decision:
    """Decide one command (``DECIDERS`` routes it)."""
    who = world.directory.principal(cmd.actor)
    if who is None:
        return Rejected(Code.FORBIDDEN, "only a signed-in person acts on folders")
    if who.read_only:
        return Rejected(Code.FORBIDDEN, f"{who.role.value}s read; they do not change folders")
    try:
        return DECIDERS[type(cmd)](cmd, world, who, now)
    except DomainError as exc:
        return Rejected(Code.REFUSED, str(exc))


def create(cmd: CreateVFolder, world: World, who: Principal, now: datetime) -> Decision:
    if cmd.owner_kind is OwnerKind.PROJECT:
        if cmd.project_id is None:
            return Rejected(Code.INVALID, "a project folder names its project (projectId)")
        project = world.directory.projects.get(cmd.project_id)
        if project is None or not _in_project(who, cmd.project_id, project.domain):
            return Rejected(Code.NOT_FOUND, f"there is no project {cmd.project_id}")
        owner_id, policy = cmd.project_id, (PolicyKind.PROJECT, project.policy)
    else:
        if cmd.project_id is not None:
            return Rejected(Code.INVALID, "projectId is for project folders (ownerKind: project)")
        user = world.directory.users[who.user_id]
        owner_id, policy = who.user_id, (PolicyKind.USER, user.policy)
    volume = cmd.volume or world.default_volume
    if volume not in world.volumes:
        known = ", ".join(sorted(world.volumes)) or "none"
        return Rejected(Code.NOT_FOUND, f"there is no volume {volume} (volumes: {known})")
    owner = (cmd.owner_kind, owner_id)
    existing = world.folders.get(cmd.folder_id)
    if existing is not None:  # the same command again
        return Change(working_copy(existing), f"folder {existing.name} exists already")
    refused = _fits_owner(world, owner, policy, cmd.name, cmd.quota_bytes)
    if refused is not None:
        return refused
    folder = VFolder.create(
        cmd.folder_id, cmd.name, cmd.owner_kind, owner_id, who.domain, volume, now,
        usage_mode=cmd.usage_mode, quota_bytes=cmd.quota_bytes, creator=who.user_id,
    )  # fmt: skip
    return Change(folder, f"folder {cmd.name} created")


def clone(cmd: CloneVFolder, world: World, who: Principal, now: datetime) -> Decision:
    """A copy of a folder the actor may read, as a new folder of their own (CLONING until
    the service has copied its bytes)."""
    existing = world.folders.get(cmd.clone_id)
    if existing is not None:  # the same command again
        return Change(working_copy(existing), f"folder {existing.name} exists already")
    source = world.folders.get(cmd.folder_id)
    if source is None or source.status is FolderStatus.PURGED or not sees(source, who):
        return Rejected(Code.NOT_FOUND, f"there is no folder {cmd.folder_id}")
    if permission_of(source, who) is None:
        return Rejected(Code.FORBIDDEN, f"you may not read folder {source.name}")
    if source.status is not FolderStatus.READY:
        return Rejected(
            Code.REFUSED, f"folder {source.name} is {source.status.value}: only a ready one clones"
        )
    volume = cmd.volume or source.volume
    if volume not in world.volumes:
        known = ", ".join(sorted(world.volumes)) or "none"
        return Rejected(Code.NOT_FOUND, f"there is no volume {volume} (volumes: {known})")
    user = world.directory.users[who.user_id]
    owner: Owner = (OwnerKind.USER, who.user_id)
    refused = _fits_owner(world, owner, (PolicyKind.USER, user.policy), cmd.name, None)
    if refused is not None:
        return refused
    folder = VFolder.create(
        cmd.clone_id, cmd.name, OwnerKind.USER, who.user_id, who.domain, volume, now,
        usage_mode=cmd.usage_mode or source.usage_mode, creator=who.user_id,
        cloned_from=source.id,
    )  # fmt: skip
    return Change(folder, f"folder {source.name} is being cloned as {cmd.name}")


def rename(cmd: RenameVFolder, world: World, who: Principal, now: datetime) -> Decision:
    def act(folder: VFolder) -> bool | Rejected:
        clash = world.folders.named((folder.owner_kind, folder.owner_id), cmd.name)
        if clash is not None and clash.id != folder.id:
            return Rejected(Code.CONFLICT, f"a folder named {cmd.name} exists already")
        return folder.rename(cmd.name, now)

    return _owned(cmd.folder_id, world, who, Permission.READ_WRITE_DELETE, act, "renamed")


def trash(cmd: TrashVFolder, world: World, who: Principal, now: datetime) -> Decision:
    act = _unmounted(world, lambda folder: folder.trash(cmd.reason, now))
    return _owned(cmd.folder_id, world, who, Permission.READ_WRITE_DELETE, act, "trashed")


def restore(cmd: RestoreVFolder, world: World, who: Principal, now: datetime) -> Decision:
    return _owned(
        cmd.folder_id, world, who, Permission.READ_WRITE_DELETE, lambda f: f.restore(now),
        "restored",
    )  # fmt: skip


def purge(cmd: PurgeVFolder, world: World, who: Principal, now: datetime) -> Decision:
    act = _unmounted(world, lambda folder: folder.purge(cmd.reason, now))
    return _owned(cmd.folder_id, world, who, Permission.READ_WRITE_DELETE, act, "purged")


def invite(cmd: InviteToVFolder, world: World, who: Principal, now: datetime) -> Decision:
    def act(folder: VFolder) -> bool | Rejected:
        invitee = world.directory.users.get(cmd.user_id)
        if invitee is None or not invitee.active or invitee.domain != folder.domain:
            return Rejected(Code.NOT_FOUND, f"there is no user {cmd.user_id}")
        return folder.invite(cmd.user_id, cmd.permission, now)

    return _owned(cmd.folder_id, world, who, None, act, "shared")


def answer(cmd: AnswerVFolderInvitation, world: World, who: Principal, now: datetime) -> Decision:
    folder = world.folders.get(cmd.folder_id)
    if folder is None or (who.user_id not in folder.invitations and not sees(folder, who)):
        return Rejected(Code.NOT_FOUND, f"there is no folder {cmd.folder_id}")
    copy = working_copy(folder)
    answer_with = copy.accept if cmd.accept else copy.decline
    changed = answer_with(who.user_id, now)
    verb = "accepted" if cmd.accept else "declined"
    return Change(copy, f"invitation to {folder.name} {verb}" if changed else "nothing changed")


def revoke(cmd: RevokeVFolderShare, world: World, who: Principal, now: datetime) -> Decision:
    return _owned(cmd.folder_id, world, who, None, lambda f: f.revoke(cmd.user_id, now), "unshared")


def leave(cmd: LeaveVFolder, world: World, who: Principal, now: datetime) -> Decision:
    folder = world.folders.get(cmd.folder_id)
    if folder is None or not sees(folder, who):
        return Rejected(Code.NOT_FOUND, f"there is no folder {cmd.folder_id}")
    copy = working_copy(folder)
    copy.leave(who.user_id, now)
    return Change(copy, f"you left folder {folder.name}")


def set_quota(cmd: SetVFolderQuota, world: World, who: Principal, now: datetime) -> Decision:
    return _owned(
        cmd.folder_id, world, who, None, lambda f: f.set_quota(cmd.quota_bytes, now),
        "given its quota",
    )  # fmt: skip


def _fits_owner(
    world: World, owner: Owner, policy: tuple[PolicyKind, str], name: str, quota: int | None
) -> Rejected | None:
    """Whether the owner may have one more folder called ``name`` with ``quota``: the name
    free among their folders, their policy's folder count and folder size not exceeded."""
    if world.folders.named(owner, name) is not None:
        return Rejected(Code.CONFLICT, f"a folder named {name} exists already")
    limits = world.directory.policies.get(policy_id_for(*policy))
    storage = limits.storage if limits is not None else None
    most = storage.max_vfolder_count if storage is not None else None
    if most is not None and world.folders.count(owner) >= most:
        return Rejected(Code.QUOTA, f"{policy[0].value} policy {policy[1]} allows {most} folder(s)")
    largest = storage.max_quota_scope_size_bytes if storage is not None else None
    if largest is not None and quota is not None and quota > largest:
        return Rejected(
            Code.QUOTA, f"{policy[0].value} policy {policy[1]} allows at most {largest} bytes"
        )
    return None


# ---- who may ------------------------------------------------------------------------------


Act = Callable[[VFolder], bool | Rejected]


def _unmounted(world: World, act: Callable[[VFolder], bool]) -> Act:
    """``act``, unless a live session mounts the folder (its bytes are in use)."""

    def checked(folder: VFolder) -> bool | Rejected:
        if world.mounted(folder.id):
            return Rejected(Code.REFUSED, f"folder {folder.name} is mounted by a live session")
        return act(folder)

    return checked


def _owned(
    folder_id: str,
    world: World,
    who: Principal,
    needed: Permission | None,
    act: Act,
    done: str,
) -> Decision:
    """Act on a working copy of the folder, if ``who`` owns or administers it (or, when
    ``needed`` is given, holds at least that permission on it)."""
    folder = world.folders.get(folder_id)
    if folder is None or not sees(folder, who):
        return Rejected(Code.NOT_FOUND, f"there is no folder {folder_id}")
    allowed = administers(folder, who) or owns(folder, who)
    if not allowed and needed is not None:
        held = folder.permission_of(who.user_id, member=folder.owner_id in who.projects)
        allowed = held is not None and held.allows(needed)
    if not allowed:
        return Rejected(Code.FORBIDDEN, f"only the owner of folder {folder.name} may do that")
    copy = working_copy(folder)
    acted = act(copy)
    if isinstance(acted, Rejected):
        return acted
    return Change(copy, f"folder {folder.name} {done}" if acted else "nothing changed")


def _in_project(who: Principal, project_id: str, domain: str) -> bool:
    if who.is_superadmin:
        return True
    if who.role is Role.ADMIN:
        return domain == who.domain
    return project_id in who.projects


DECIDERS: dict[type[Any], Callable[[Any, World, Principal, datetime], Decision]] = {
    CreateVFolder: create,
    CloneVFolder: clone,
    RenameVFolder: rename,
    TrashVFolder: trash,
    RestoreVFolder: restore,
    PurgeVFolder: purge,
    InviteToVFolder: invite,
    AnswerVFolderInvitation: answer,
    RevokeVFolderShare: revoke,
    LeaveVFolder: leave,
    SetVFolderQuota: set_quota,
}
