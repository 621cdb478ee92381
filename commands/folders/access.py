"""Who may see and use a virtual folder: the access rules the storage service's decisions, the
scheduler's mount checks and the data plane share. Pure; reads and writes nothing.

Another tenant's folder answers exactly like one that does not exist (callers turn "cannot
see" into "not found").
"""

from __future__ import annotations

from commands.authorisation import Principal
from commands.folders.aggregate import VFolder
from schemas.tenancy import Role
from schemas.vfolder import OwnerKind, Permission


def administers_domain(who: Principal) -> bool:
    return who.is_superadmin or who.role is Role.ADMIN


def administers(folder: VFolder, who: Principal) -> bool:
    return who.is_superadmin or (who.role is Role.ADMIN and folder.domain == who.domain)


def owns(folder: VFolder, who: Principal) -> bool:
    """A user folder's owner (a project folder's members use it; its admins manage it)."""
    return folder.owner_kind is OwnerKind.USER and folder.owner_id == who.user_id


def sees(folder: VFolder, who: Principal) -> bool:
    """Owner, sharer, invitee, member of the owning project, or an admin of its domain."""
    if administers(folder, who) or owns(folder, who):
        return True
    if folder.owner_kind is OwnerKind.PROJECT and folder.owner_id in who.projects:
        return True
    return who.user_id in folder.shares or who.user_id in folder.invitations


def permission_of(folder: VFolder, who: Principal) -> Permission | None:
    """What ``who`` may do with the folder's bytes: its owner everything, a member of the
    owning project read-write, a sharer their share, an admin of its domain everything,
    anyone else nothing."""
    held = folder.permission_of(who.user_id, member=folder.owner_id in who.projects)
    if held is None and administers(folder, who):
        return Permission.READ_WRITE_DELETE
    return held
