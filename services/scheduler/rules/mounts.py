"""Mount rule, pure (reads and writes no subjects): which folders a new session mounts.

Each folder the spec asks for is resolved for the session's owner, as the folders fold
answers (``commands.folders.index``): by id, else by name among their own folders, the session's
project's, then those shared with them. One they cannot see answers exactly like one that does
not exist. Only a ``ready`` folder is mounted; a read-only permission mounts read-only whatever
was asked. Then the dot-folders (``schemas.vfolder.auto_mounted``) of the owner and of the
session's project that are ready and not named are added, each at its default path unless a
named mount (or an earlier dot-folder: the owner's come first) is there already. Two named
mounts at one path are refused.
"""

from __future__ import annotations

from collections.abc import Sequence

from commands.authorisation import Principal
from commands.folders.access import permission_of
from commands.folders.aggregate import VFolder
from commands.folders.index import Folders
from commands.outcome import Code, Rejected
from schemas.vfolder import (
    FolderStatus,
    Mount,
    MountRequest,
    OwnerKind,
    Permission,
    auto_mounted,
    default_mount_path,
)


def unresolved(folders: Folders, who: Principal | None, project_id: str, ref: str) -> bool:
    """Whether ``ref`` names no mountable folder for ``who`` in the folders folded so far:
    a fresher fold may know it (created, restored or shared just before the create)."""
    if who is None:
        return True
    folder = folders.find(who, ref, project_id)
    return folder is None or permission_of(folder, who) is None or not folder.mountable


def resolve_mounts(
    folders: Folders, who: Principal, project_id: str, requests: Sequence[MountRequest]
) -> tuple[Mount, ...] | Rejected:
    """The session's mounts (named ones first, in the order asked, then dot-folders), or why
    it cannot be created."""
    mounts: list[Mount] = []
    for request in requests:
        folder = folders.find(who, request.folder, project_id)
        permission = None if folder is None else permission_of(folder, who)
        if folder is None or permission is None:
            return Rejected(Code.NOT_FOUND, f"there is no folder {request.folder}")
        if folder.status is not FolderStatus.READY:
            return Rejected(
                Code.CONFLICT,
                f"folder {folder.name} is {folder.status.value}: only a ready folder is mounted",
            )
        if any(m.folder_id == folder.id for m in mounts):
            return Rejected(Code.INVALID, f"folder {folder.name} is mounted more than once")
        mount = _mount(folder, permission, request.path, request.read_only)
        taken = next((m for m in mounts if m.path == mount.path), None)
        if taken is not None:
            return Rejected(
                Code.INVALID,
                f"folders {taken.name} and {folder.name} are both mounted at {mount.path}: "
                "give one another path",
            )
        mounts.append(mount)
    for owner in ((OwnerKind.USER, who.user_id), (OwnerKind.PROJECT, project_id)):
        for folder in sorted(folders.of_owner(owner), key=lambda f: f.name):
            if not auto_mounted(folder.name) or folder.status is not FolderStatus.READY:
                continue
            permission = permission_of(folder, who)
            if permission is None or any(m.folder_id == folder.id for m in mounts):
                continue
            mount = _mount(folder, permission, None, False)
            if all(m.path != mount.path for m in mounts):
                mounts.append(mount)
    return tuple(mounts)


def _mount(folder: VFolder, permission: Permission, path: str | None, read_only: bool) -> Mount:
    return Mount(
        folder_id=folder.id,
        name=folder.name,
        volume=folder.volume,
        path=path or default_mount_path(folder.name),
        read_only=read_only or not permission.allows(Permission.READ_WRITE),
    )
