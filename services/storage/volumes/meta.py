"""Per-folder metadata kept by a volume: the quota, and the usage where it is kept.

One small JSON file per folder under ``<root>/.jetyard/meta/<h>/<h>/<id>.json`` (the same
buckets as the folders), outside every folder's tree so a session cannot edit its own
quota. Writes go to a temporary file renamed into place (a crash leaves the old or the new
content, never half), under one lock file per volume (``flock``, which NFS v4 and CephFS
honour across hosts): updates are rare (an upload finished, a delete), so one lock is enough.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from schemas.vfolder import folder_relpath

COUNT_RULES = 2
"""The rules kept counts follow (``foldertree.Usage``). 1: every entry but directories was a
file and a hard-linked file's bytes counted once per name; 2: regular files, symlinks and the
rest apart, a file's bytes once. Counts kept under older rules are walked again when read."""


class FolderMeta(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    quota: int | None = Field(default=None, ge=0)
    bytes: int = Field(default=0, ge=0)
    files: int = Field(default=0, ge=0)
    links: int = Field(default=0, ge=0)
    others: int = Field(default=0, ge=0)
    counted: bool = False  # whether the counts were ever counted (else: walk first)
    count_rules: int = 1  # which ``COUNT_RULES`` they follow (files before it: 1)

    @property
    def counts_current(self) -> bool:
        """Whether the kept counts can be read as they are (else: walk first)."""
        return self.counted and self.count_rules == COUNT_RULES


class MetaStore:
    def __init__(self, service_dir: Path) -> None:
        self._dir = service_dir / "meta"
        self._lock = service_dir / "meta.lock"
        self._dir.mkdir(parents=True, exist_ok=True)

    def path(self, folder_id: str) -> Path:
        return self._dir / folder_relpath(folder_id).with_suffix(".json")

    def read(self, folder_id: str) -> FolderMeta:
        try:
            text = self.path(folder_id).read_text()
        except FileNotFoundError:
            return FolderMeta()
        return FolderMeta.model_validate_json(text)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self._lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def update(self, folder_id: str, change: Callable[[FolderMeta], FolderMeta]) -> FolderMeta:
        path = self.path(folder_id)
        with self._locked():
            new = change(self.read(folder_id))
            path.parent.mkdir(parents=True, exist_ok=True)
            temp = path.with_suffix(f".{os.getpid()}.tmp")
            temp.write_text(new.model_dump_json())
            os.replace(temp, path)
        return new

    def remove(self, folder_id: str) -> None:
        with self._locked():
            self.path(folder_id).unlink(missing_ok=True)
