"""Usage counts kept in a folder's metadata instead of walked on every read (the ``shared`` and
``btrfs`` backends): walked once, then moved by every change the data plane makes; a recount
walks again, and so does a read of counts kept under older rules (``COUNT_RULES``). Which
counts are kept is the backend's: ``shared`` keeps them all, ``btrfs`` all but the bytes (its
qgroups hold them)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from services.storage.foldertree import Usage
from services.storage.volumes.meta import COUNT_RULES, FolderMeta, MetaStore

# Every count of ``Usage``, by name (``FolderMeta`` has a field of each name): a count added
# to both is kept with no change here.
ALL = tuple(f.name for f in fields(Usage))
ALL_BUT_BYTES = tuple(name for name in ALL if name != "bytes")


class KeptCounts:
    def __init__(self, meta: MetaStore, names: tuple[str, ...] = ALL) -> None:
        self.meta, self.names = meta, names

    def read(self, folder_id: str, walk: Callable[[str], Usage]) -> Usage:
        """The kept counts (those not kept: 0), walked with ``walk`` and kept first if need
        be."""
        meta = self.meta.read(folder_id)
        if not meta.counts_current:
            return self.keep(folder_id, walk(folder_id))
        return Usage(**{name: getattr(meta, name) for name in self.names})

    def keep(self, folder_id: str, counted: Usage) -> Usage:
        """Keep what a walk counted; the counts kept."""
        kept = {name: getattr(counted, name) for name in self.names}
        update: dict[str, object] = {**kept, "counted": True, "count_rules": COUNT_RULES}
        self.meta.update(folder_id, lambda meta: meta.model_copy(update=update))
        return Usage(**kept)

    def move(self, folder_id: str, change: Usage) -> None:
        def moved(meta: FolderMeta) -> FolderMeta:
            if not meta.counts_current:
                return meta  # the next read walks anyway
            update = {
                name: max(0, getattr(meta, name) + getattr(change, name)) for name in self.names
            }
            return meta.model_copy(update=update)

        self.meta.update(folder_id, moved)
