"""Events of the ``vfolder`` aggregate (``ev.vfolder.<folder id>``), written only by the storage
service. The bytes never enter the log: these say what a folder is, who may use it, where it
stands, and how much it holds."""

from __future__ import annotations

from events.catalogue import Event, event
from schemas.subjects import AggregateType
from schemas.vfolder import OwnerKind, Permission, UsageMode

VFOLDER = AggregateType.VFOLDER


@event("VFolderCreated", VFOLDER)
class VFolderCreated(Event):
    name: str
    owner_kind: OwnerKind
    owner_id: str
    """A user id or a project id."""
    domain: str
    volume: str
    usage_mode: UsageMode = UsageMode.GENERAL
    quota_bytes: int | None = None
    creator: str = ""
    """The user who asked for it."""
    cloned_from: str | None = None
    """Set when it is made as a clone: it is CLONING until ``VFolderCloned``."""


@event("VFolderRenamed", VFOLDER)
class VFolderRenamed(Event):
    name: str


@event("VFolderCloned", VFOLDER)
class VFolderCloned(Event):
    """The clone's bytes are all copied: READY."""

    bytes_used: int = 0
    files: int = 0


@event("VFolderCloneFailed", VFOLDER)
class VFolderCloneFailed(Event):
    reason: str


@event("VFolderTrashed", VFOLDER)
class VFolderTrashed(Event):
    reason: str = ""


@event("VFolderRestored", VFOLDER)
class VFolderRestored(Event):
    pass


@event("VFolderPurged", VFOLDER)
class VFolderPurged(Event):
    """Its bytes are deleted and its name is free; nothing follows."""

    reason: str = ""


@event("VFolderInvited", VFOLDER)
class VFolderInvited(Event):
    """A user is invited to share the folder with ``permission`` (until they accept, nothing
    is shared)."""

    user_id: str
    permission: Permission


@event("VFolderInvitationAccepted", VFOLDER)
class VFolderInvitationAccepted(Event):
    user_id: str


@event("VFolderInvitationDeclined", VFOLDER)
class VFolderInvitationDeclined(Event):
    user_id: str


@event("VFolderShareChanged", VFOLDER)
class VFolderShareChanged(Event):
    """A sharer's permission changed (by the owner)."""

    user_id: str
    permission: Permission


@event("VFolderShareRevoked", VFOLDER)
class VFolderShareRevoked(Event):
    """The owner took a share (or an invitation) back."""

    user_id: str


@event("VFolderLeft", VFOLDER)
class VFolderLeft(Event):
    """A sharer gave their share up."""

    user_id: str


@event("VFolderQuotaSet", VFOLDER)
class VFolderQuotaSet(Event):
    quota_bytes: int | None
    """None: no folder quota (the owner's policy may still limit the total)."""


@event("VFolderUsageMeasured", VFOLDER)
class VFolderUsageMeasured(Event):
    """What the folder holds, measured after a change (an upload completed, files deleted)."""

    bytes_used: int
    files: int
