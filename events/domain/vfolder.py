"""Events of the ``vfolder`` aggregate (``ev.vfolder.<folder id>``), written only by the storage
service. The bytes never enter the log: these say what a folder is, who may use it, where it
stands, and how much it holds.

v2 of the usage events (``VFolderCloned``, ``VFolderUsageMeasured``) counts regular files,
symlinks and other entries apart, and a hard-linked file's bytes once; v1 counted every entry
but directories as a file. The v1 count cannot be split after the fact: v1 events are upcast
with it as ``files`` and no links or others, until the folder is measured again."""

from __future__ import annotations

from events.catalogue import Event, Payload, event, upcaster
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


@event("VFolderCloned", VFOLDER, version=2)
class VFolderCloned(Event):
    """The clone's bytes are all copied: READY. The counts are what was copied, as
    ``VFolderUsageMeasured``'s."""

    bytes_used: int = 0
    files: int = 0
    links: int = 0
    others: int = 0
    """Always 0: a clone leaves FIFOs, sockets and devices out."""


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


@event("VFolderUsageMeasured", VFOLDER, version=2)
class VFolderUsageMeasured(Event):
    """What the folder holds, measured after a change (an upload completed, files deleted).
    Directories are not counted."""

    bytes_used: int
    """Apparent sizes of regular files, a file with several names (hard links) once."""
    files: int
    """Names of regular files (a file with two names counts two)."""
    links: int = 0
    """Symlinks."""
    others: int = 0
    """FIFOs, sockets and devices."""


@upcaster("VFolderCloned", from_version=1)
@upcaster("VFolderUsageMeasured", from_version=1)
def _usage_v1_to_v2(payload: Payload) -> Payload:
    # v1's files held symlinks and other entries too; which of them were which is lost.
    return {"links": 0, "others": 0, **payload}
