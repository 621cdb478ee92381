"""What the storage service folds: the tenancy directory (the tenancy subjects), the folders
(``ev.vfolder.*``) and the folders live sessions mount (``ev.session.*``), and what the
service must do about them on disk. Pure: ``evolve`` does no I/O; it records which folders
changed (to be made, given their quota, cloned or removed) and which a session that wrote to
them has just left (to be measured), for the service's workers to act on."""

from __future__ import annotations

from collections.abc import Callable

from commands.directory import TENANCY_SUBJECTS, TENANCY_TYPES, Directory
from commands.folders.index import VFOLDER_SUBJECTS, Folders
from events.envelope import StoredEvent
from events.fold import FoldedState
from schemas.subjects import AggregateType, events_of
from services.storage.control.mounts import Mounts

SUBJECTS = [*TENANCY_SUBJECTS, *VFOLDER_SUBJECTS, events_of(AggregateType.SESSION)]
_TENANCY = {t.value for t in TENANCY_TYPES}


class StorageState(FoldedState):
    folds_corrections = True  # the directory keeps ev.correction.* (the tenancy service's)
    consumer = "storage"

    def __init__(self) -> None:
        super().__init__()
        self.directory = Directory()
        self.folders = Folders()
        self.mounts = Mounts()
        self.changed: dict[str, None] = {}
        """Folders whose bytes on disk may no longer match what the log says (an ordered
        set): made, quota, clone, removal. Every folder folded lands here once."""
        self.to_measure: dict[str, None] = {}
        """Folders a session that mounted them read-write has just left."""
        self.wake: Callable[[], None] = lambda: None
        """Called when ``changed`` or ``to_measure`` gained a folder."""

    def evolve(self, event: StoredEvent) -> None:
        kind = event.envelope.aggregate_type
        if kind is AggregateType.VFOLDER:
            self.folders.evolve(event)
            if event.envelope.name != "VFolderUsageMeasured":
                self.changed[event.envelope.aggregate_id] = None
                self.wake()
        elif kind is AggregateType.SESSION:
            for mount in self.mounts.evolve(event):
                if not mount.read_only:
                    self.to_measure[mount.folder_id] = None
                    self.wake()
        elif kind in TENANCY_TYPES:
            self.directory.evolve(event)

    def forget(self, subject: str) -> None:
        parts = subject.split(".", 2)
        if len(parts) != 3:
            return
        kind, aggregate_id = parts[1], parts[2]
        if kind == AggregateType.VFOLDER:
            self.folders.forget(subject)
        elif kind == AggregateType.SESSION:
            self.mounts.drop(aggregate_id)
        elif kind in _TENANCY:
            self.directory.forget(subject)
