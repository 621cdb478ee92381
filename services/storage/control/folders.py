"""Every virtual folder as the storage service knows it, with the index its rules need: the
live folders (not purged) of each owner by name. Folded from ``ev.vfolder.*``; pure otherwise
(the deciders read it, ``put`` keeps it after a decision is stored)."""

from __future__ import annotations

from commands.vfolder import VFolder
from schemas.vfolder import FolderStatus, OwnerKind

Owner = tuple[OwnerKind, str]


class Folders:
    def __init__(self) -> None:
        self.by_id: dict[str, VFolder] = {}
        self._names: dict[Owner, dict[str, str]] = {}
        """Owner -> name -> id, for folders not purged."""
        self._indexed: dict[str, tuple[Owner, str]] = {}
        """Id -> the owner and name it is indexed under (the folder object may have changed
        in place since)."""

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

    def get(self, folder_id: str) -> VFolder | None:
        return self.by_id.get(folder_id)

    def named(self, owner: Owner, name: str) -> VFolder | None:
        """The owner's live folder called ``name``."""
        folder_id = self._names.get(owner, {}).get(name)
        return None if folder_id is None else self.by_id[folder_id]

    def count(self, owner: Owner) -> int:
        """The owner's folders that are not purged (trashed ones count: they hold bytes)."""
        return len(self._names.get(owner, {}))
