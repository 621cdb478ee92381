"""What every directory-tree backend shares: the folder layout under a root, the service
directory beside the folders, quota and usage kept in ``meta``. Backends differ in where
the root is, who can mount it and how usage is read (``local``, ``shared``)."""

from __future__ import annotations

import os
import shutil
import stat
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

from schemas.vfolder import folder_relpath
from services.storage.folderfs import open_root
from services.storage.foldertree import Usage, usage
from services.storage.volumes.base import SERVICE_DIR, FolderNotFound
from services.storage.volumes.meta import MetaStore


class TreeVolume(ABC):
    parts_counted = False  # partial uploads lie in the volume's upload area, in no folder

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        self.root = root
        service = root / SERVICE_DIR
        self._uploads = service / "uploads"
        self._uploads.mkdir(parents=True, exist_ok=True)
        self.meta = MetaStore(service)

    def _path(self, folder_id: str) -> Path:
        return self.root / folder_relpath(folder_id)

    def create_folder(self, folder_id: str) -> Path:
        path = self._path(folder_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(exist_ok=True)
        return path

    def remove_folder(self, folder_id: str) -> None:
        path = self._path(folder_id)
        try:
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path)  # fd-based on Linux: planted symlinks are unlinked only
            else:
                path.unlink()
        except FileNotFoundError:
            pass
        self.meta.remove(folder_id)

    def folder_root(self, folder_id: str) -> Path:
        path = self._path(folder_id)
        try:
            is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        except FileNotFoundError:
            is_dir = False
        if not is_dir:
            raise FolderNotFound(self.name, folder_id)
        return path

    def count(self, folder_id: str) -> Usage:
        with open_root(self.folder_root(folder_id)) as fd:
            return usage(fd)

    @abstractmethod
    def usage(self, folder_id: str) -> Usage: ...

    def quota_used(self, folder_id: str) -> int:
        return self.usage(folder_id).bytes

    def quota(self, folder_id: str) -> int | None:
        return self.meta.read(folder_id).quota

    def set_quota(self, folder_id: str, limit: int | None) -> None:
        self.folder_root(folder_id)
        self.meta.update(folder_id, lambda meta: meta.model_copy(update={"quota": limit}))

    def upload_area(self, folder_id: str) -> Path:
        return self._uploads

    def upload_areas(self) -> Iterator[Path]:
        yield self._uploads
