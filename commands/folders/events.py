"""How each event of the ``vfolder`` aggregate (``ev.vfolder.<folder id>``) evolves a folder:
every class pairs a catalogue event with ``apply``. ``VFolder`` binds them in its body, so they
are its nested event classes (``VFolder.Renamed``; ``Created`` is defined in its body). Pure;
no subjects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.aggregate import Aggregate
from events.domain.vfolder import (
    VFolderCloned,
    VFolderCloneFailed,
    VFolderInvitationAccepted,
    VFolderInvitationDeclined,
    VFolderInvited,
    VFolderLeft,
    VFolderPurged,
    VFolderQuotaSet,
    VFolderRenamed,
    VFolderRestored,
    VFolderShareChanged,
    VFolderShareRevoked,
    VFolderTrashed,
    VFolderUsageMeasured,
)
from schemas.vfolder import FolderStatus

if TYPE_CHECKING:
    from commands.folders.aggregate import VFolder

F = FolderStatus


class Renamed(VFolderRenamed, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.name = self.name


class Cloned(VFolderCloned, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.status = F.READY
        folder.bytes_used, folder.files = self.bytes_used, self.files
        folder.links, folder.others = self.links, self.others


class CloneFailed(VFolderCloneFailed, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.status = F.CLONE_FAILED


class Trashed(VFolderTrashed, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.status = F.TRASHED


class Restored(VFolderRestored, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.status = F.READY


class Purged(VFolderPurged, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.status = F.PURGED
        folder.shares, folder.invitations = {}, {}
        folder.bytes_used = folder.files = folder.links = folder.others = 0


class Invited(VFolderInvited, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.invitations = {**folder.invitations, self.user_id: self.permission}


class InvitationAccepted(VFolderInvitationAccepted, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        invitations = dict(folder.invitations)
        folder.shares = {**folder.shares, self.user_id: invitations.pop(self.user_id)}
        folder.invitations = invitations


class InvitationDeclined(VFolderInvitationDeclined, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.invitations = {k: v for k, v in folder.invitations.items() if k != self.user_id}


class ShareChanged(VFolderShareChanged, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.shares = {**folder.shares, self.user_id: self.permission}


class ShareRevoked(VFolderShareRevoked, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.shares = {k: v for k, v in folder.shares.items() if k != self.user_id}
        folder.invitations = {k: v for k, v in folder.invitations.items() if k != self.user_id}


class Left(VFolderLeft, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.shares = {k: v for k, v in folder.shares.items() if k != self.user_id}


class QuotaSet(VFolderQuotaSet, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.quota_bytes = self.quota_bytes


class UsageMeasured(VFolderUsageMeasured, Aggregate.Event):
    def apply(self, folder: VFolder) -> None:
        folder.bytes_used, folder.files = self.bytes_used, self.files
        folder.links, folder.others = self.links, self.others
