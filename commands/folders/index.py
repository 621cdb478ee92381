"""Every virtual folder as a service knows it, folded from ``ev.vfolder.*``: the index the
storage service's decisions and the scheduler's mount checks share (the live folders, not
purged, of each owner by name; the folders shared with each user) and which folder a session's
mount request names. Who may see or use a folder is ``commands.folders.access``'s.

Pure apart from folding; reads and writes nothing itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from commands.authorisation import Principal
from commands.folders.access import administers_domain, sees
from commands.folders.aggregate import VFolder
from events.envelope import StoredEvent
from events.fold import FoldedState
from schemas.subjects import AggregateType, events_of
from schemas.vfolder import FolderStatus, OwnerKind

Owner = tuple[OwnerKind, str]
VFOLDER_SUBJECTS = [events_of(AggregateType.VFOLDER)]
"""The filter a fold of the folders reads."""


class Folders(FoldedState):
    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, VFolder] = {}
        self._names: dict[Owner, dict[str, str]] = {}
        """Owner -> name -> id, for folders not purged."""
        self._indexed: dict[str, tuple[Owner, str]] = {}
        """Id -> the owner and name it is indexed under (the folder object may have changed
        in place since)."""
        self._shared_with: dict[str, set[str]] = {}
        """User id -> ids of the folders shared with them (accepted shares)."""
        self._sharers: dict[str, frozenset[str]] = {}
        """Folder id -> the users it is indexed as shared with."""

    # ---- folding -------------------------------------------------------------------------

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        if envelope.aggregate_type is not AggregateType.VFOLDER:
            return
        known = self.by_id.get(envelope.aggregate_id)
        if known is None:
            created = VFolder.rehydrate([envelope])
            assert created is not None
            self.put(created)
        else:
            known.evolve([envelope])
            self.put(known)

    def forget(self, subject: str) -> None:
        self.broken.add(subject)
        folder_id = subject.split(".", 2)[-1]
        self.by_id.pop(folder_id, None)
        indexed = self._indexed.pop(folder_id, None)
        if indexed is not None:
            owner, name = indexed
            self._names[owner].pop(name, None)
        self._index_shares(folder_id, frozenset())

    def put(self, folder: VFolder) -> None:
        """Take ``folder`` as it now is (created, renamed, purged...)."""
        indexed = self._indexed.pop(folder.id, None)
        if indexed is not None:
            owner, name = indexed
            self._names[owner].pop(name, None)
        self.by_id[folder.id] = folder
        if folder.status is not FolderStatus.PURGED:
            owner = (folder.owner_kind, folder.owner_id)
            self._names.setdefault(owner, {})[folder.name] = folder.id
            self._indexed[folder.id] = (owner, folder.name)
        self._index_shares(folder.id, frozenset(folder.shares))

    def _index_shares(self, folder_id: str, users: frozenset[str]) -> None:
        before = self._sharers.pop(folder_id, frozenset())
        for user_id in before - users:
            self._shared_with[user_id].discard(folder_id)
        for user_id in users - before:
            self._shared_with.setdefault(user_id, set()).add(folder_id)
        if users:
            self._sharers[folder_id] = users

    # ---- reading -------------------------------------------------------------------------

    def get(self, folder_id: str) -> VFolder | None:
        return self.by_id.get(folder_id)

    def named(self, owner: Owner, name: str) -> VFolder | None:
        """The owner's live folder called ``name``."""
        folder_id = self._names.get(owner, {}).get(name)
        return None if folder_id is None else self.by_id[folder_id]

    def count(self, owner: Owner) -> int:
        """The owner's folders that are not purged (trashed ones count: they hold bytes)."""
        return len(self._names.get(owner, {}))

    def bytes_used(self, owner: Owner) -> int:
        """What the owner's folders that are not purged hold together."""
        ids = self._names.get(owner, {}).values()
        return sum(self.by_id[i].bytes_used for i in ids)

    def of_owner(self, owner: Owner) -> Iterator[VFolder]:
        for folder_id in self._names.get(owner, {}).values():
            yield self.by_id[folder_id]

    def find(self, who: Principal, ref: str, project_id: str | None = None) -> VFolder | None:
        """The folder ``ref`` names for ``who``: an id of a folder they see, else a name,
        looked up among their own folders, then the project's (``project_id``), then those
        shared with them (a name shared by two sharers is ambiguous: None)."""
        by_id = self.by_id.get(ref)
        if by_id is not None and by_id.status is not FolderStatus.PURGED and sees(by_id, who):
            return by_id
        own = self.named((OwnerKind.USER, who.user_id), ref)
        if own is not None:
            return own
        if project_id is not None and (project_id in who.projects or administers_domain(who)):
            project = self.named((OwnerKind.PROJECT, project_id), ref)
            if project is not None and sees(project, who):
                return project
        shared = [
            folder for folder_id in self._shared_with.get(who.user_id, ())
            if (folder := self.by_id[folder_id]).name == ref
            and folder.status is not FolderStatus.PURGED
        ]  # fmt: skip
        return shared[0] if len(shared) == 1 else None

    def shared_with(self, user_id: str) -> Iterator[VFolder]:
        """The folders shared with ``user_id`` (accepted shares), purged ones excepted."""
        for folder_id in self._shared_with.get(user_id, ()):
            folder = self.by_id[folder_id]
            if folder.status is not FolderStatus.PURGED:
                yield folder
