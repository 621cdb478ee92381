"""The ``vfolder`` aggregate (``ev.vfolder.<folder id>``): one virtual folder's name, owner,
status, shares and quota, decided by the storage service. Pure; the bytes are the data
plane's.

Rules that need more than this folder (a name unique per owner, the owner's folder count and
size limits, whether a live session mounts it, whether an invitee exists) are the storage
service's; the rules here need only the folder itself. Repeating a change that is already true
records nothing and answers False; a change the folder's state forbids raises
``FolderStateError`` with a sentence saying why.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.errors import DomainError
from commands.folders import events
from events.domain.vfolder import VFolderCreated
from schemas.subjects import AggregateType
from schemas.vfolder import FolderStatus, OwnerKind, Permission, UsageMode, folder_name_problem

F = FolderStatus


class FolderStateError(DomainError):
    """The folder's state (status, owner kind, shares) forbids the change."""


class VFolder(Aggregate):
    aggregate_type = AggregateType.VFOLDER

    class State(BaseModel):
        name: str
        owner_kind: OwnerKind
        owner_id: str
        domain: str
        volume: str
        usage_mode: UsageMode
        quota_bytes: int | None
        creator: str
        cloned_from: str | None
        status: FolderStatus
        shares: dict[str, Permission]
        invitations: dict[str, Permission]
        bytes_used: int
        files: int
        links: int = 0
        others: int = 0

    def __init__(self) -> None:
        self.name = ""
        self.owner_kind = OwnerKind.USER
        self.owner_id = ""
        self.domain = ""
        self.volume = ""
        self.usage_mode = UsageMode.GENERAL
        self.quota_bytes: int | None = None
        self.creator = ""
        self.cloned_from: str | None = None
        self.status = F.READY
        self.shares: dict[str, Permission] = {}
        """User id -> what an accepted share allows (user-owned folders only)."""
        self.invitations: dict[str, Permission] = {}
        """User id -> the permission offered, until accepted or declined."""
        self.bytes_used = 0
        self.files = 0
        """Names of regular files (``services.storage.foldertree.Usage`` says why names)."""
        self.links = 0
        self.others = 0

    # ---- commands ------------------------------------------------------------------------

    @classmethod
    def create(
        cls, folder_id: str, name: str, owner_kind: OwnerKind, owner_id: str, domain: str,
        volume: str, now: datetime, *, usage_mode: UsageMode = UsageMode.GENERAL,
        quota_bytes: int | None = None, creator: str = "", cloned_from: str | None = None,
    ) -> VFolder:  # fmt: skip
        _check_name(name)
        _check_quota(quota_bytes)
        return cls._create(
            cls.Created, id=folder_id, timestamp=now, name=name, owner_kind=owner_kind,
            owner_id=owner_id, domain=domain, volume=volume, usage_mode=usage_mode,
            quota_bytes=quota_bytes, creator=creator, cloned_from=cloned_from,
        )  # fmt: skip

    def rename(self, name: str, now: datetime) -> bool:
        self._live("renamed")
        _check_name(name)
        return name != self.name and self._trigger(self.Renamed, now, name=name)

    def cloned(
        self, bytes_used: int, files: int, now: datetime, *, links: int = 0, others: int = 0
    ) -> bool:
        if self.status is not F.CLONING:
            return False
        return self._trigger(
            self.Cloned, now, bytes_used=bytes_used, files=files, links=links, others=others
        )

    def clone_failed(self, reason: str, now: datetime) -> bool:
        if self.status is not F.CLONING:
            return False
        return self._trigger(self.CloneFailed, now, reason=reason)

    def trash(self, reason: str, now: datetime) -> bool:
        """Into the trash (the storage service first checks no live session mounts it)."""
        if self.status is F.TRASHED:
            return False
        if self.status in (F.PURGED, F.CLONING):
            raise FolderStateError(
                f"folder {self.name} is {self.status.value}: it cannot be trashed"
            )
        return self._trigger(self.Trashed, now, reason=reason)

    def restore(self, now: datetime) -> bool:
        if self.status is F.TRASHED:
            return self._trigger(self.Restored, now)
        if self.status is F.PURGED:
            raise FolderStateError(f"folder {self.name} was purged: nothing is left to restore")
        return False

    def purge(self, reason: str, now: datetime) -> bool:
        """Its bytes go for good; only from the trash."""
        if self.status is F.PURGED:
            return False
        if self.status is not F.TRASHED:
            raise FolderStateError(
                f"folder {self.name} is {self.status.value}: move it to the trash before purging"
            )
        return self._trigger(self.Purged, now, reason=reason)

    def invite(self, user_id: str, permission: Permission, now: datetime) -> bool:
        self._live("shared")
        if self.owner_kind is OwnerKind.PROJECT:
            raise FolderStateError(
                f"folder {self.name} belongs to a project: its members share it already"
            )
        if user_id == self.owner_id:
            raise FolderStateError(f"folder {self.name} is already its owner's")
        if user_id in self.shares:
            return self.change_share(user_id, permission, now)
        if self.invitations.get(user_id) is permission:
            return False
        return self._trigger(self.Invited, now, user_id=user_id, permission=permission)

    def accept(self, user_id: str, now: datetime) -> bool:
        if user_id in self.shares:
            return False
        self._invited(user_id)
        return self._trigger(self.InvitationAccepted, now, user_id=user_id)

    def decline(self, user_id: str, now: datetime) -> bool:
        if user_id in self.shares:
            raise FolderStateError(f"the invitation to {self.name} was accepted already")
        self._invited(user_id)
        return self._trigger(self.InvitationDeclined, now, user_id=user_id)

    def change_share(self, user_id: str, permission: Permission, now: datetime) -> bool:
        if user_id not in self.shares:
            raise FolderStateError(f"folder {self.name} is not shared with user {user_id}")
        if self.shares[user_id] is permission:
            return False
        return self._trigger(self.ShareChanged, now, user_id=user_id, permission=permission)

    def revoke(self, user_id: str, now: datetime) -> bool:
        """The owner takes a share or an invitation back."""
        if user_id not in self.shares and user_id not in self.invitations:
            return False
        return self._trigger(self.ShareRevoked, now, user_id=user_id)

    def leave(self, user_id: str, now: datetime) -> bool:
        """A sharer gives their share up."""
        if user_id not in self.shares:
            raise FolderStateError(f"folder {self.name} is not shared with user {user_id}")
        return self._trigger(self.Left, now, user_id=user_id)

    def set_quota(self, quota_bytes: int | None, now: datetime) -> bool:
        self._live("given a quota")
        _check_quota(quota_bytes)
        if quota_bytes == self.quota_bytes:
            return False
        return self._trigger(self.QuotaSet, now, quota_bytes=quota_bytes)

    def measured(
        self, bytes_used: int, files: int, now: datetime, *, links: int = 0, others: int = 0
    ) -> bool:
        counts = (bytes_used, files, links, others)
        if min(counts) < 0:
            raise FolderStateError("usage cannot be negative")
        if counts == self._counts or self.status is F.PURGED:
            return False
        return self._trigger(
            self.UsageMeasured, now,
            bytes_used=bytes_used, files=files, links=links, others=others,
        )  # fmt: skip

    # ---- queries -------------------------------------------------------------------------

    def permission_of(self, user_id: str, *, member: bool = False) -> Permission | None:
        """What ``user_id`` may do with the folder: its owner everything; a sharer their
        share; a member of the owning project (``member``) read-write; anyone else nothing."""
        if self.owner_kind is OwnerKind.USER and user_id == self.owner_id:
            return Permission.READ_WRITE_DELETE
        if self.owner_kind is OwnerKind.PROJECT and member:
            return Permission.READ_WRITE
        return self.shares.get(user_id)

    @property
    def _counts(self) -> tuple[int, int, int, int]:
        return (self.bytes_used, self.files, self.links, self.others)

    @property
    def mountable(self) -> bool:
        return self.status is F.READY

    def _live(self, what: str) -> None:
        if self.status is not F.READY:
            raise FolderStateError(
                f"folder {self.name} is {self.status.value}: it cannot be {what}"
            )

    def _invited(self, user_id: str) -> None:
        if user_id not in self.invitations:
            raise FolderStateError(f"user {user_id} has no invitation to folder {self.name}")

    # ---- events (``commands.folders.events``) -------------------------------------------

    class Created(VFolderCreated, Aggregate.Created):
        def apply(self, folder: VFolder) -> None:
            folder.name, folder.owner_kind, folder.owner_id = (
                self.name, self.owner_kind, self.owner_id,
            )  # fmt: skip
            folder.domain, folder.volume, folder.usage_mode = (
                self.domain, self.volume, self.usage_mode,
            )  # fmt: skip
            folder.quota_bytes, folder.creator = self.quota_bytes, self.creator
            folder.cloned_from = self.cloned_from
            folder.status = F.CLONING if self.cloned_from is not None else F.READY

    Renamed = events.Renamed
    Cloned = events.Cloned
    CloneFailed = events.CloneFailed
    Trashed = events.Trashed
    Restored = events.Restored
    Purged = events.Purged
    Invited = events.Invited
    InvitationAccepted = events.InvitationAccepted
    InvitationDeclined = events.InvitationDeclined
    ShareChanged = events.ShareChanged
    ShareRevoked = events.ShareRevoked
    Left = events.Left
    QuotaSet = events.QuotaSet
    UsageMeasured = events.UsageMeasured


def _check_name(name: str) -> None:
    problem = folder_name_problem(name)
    if problem is not None:
        raise FolderStateError(problem)


def _check_quota(quota_bytes: int | None) -> None:
    if quota_bytes is not None and not 0 < quota_bytes < 1 << 62:
        raise FolderStateError(f"a folder quota must be 1 byte to 4 EiB, got {quota_bytes}")
