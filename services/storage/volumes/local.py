"""The local-filesystem backend: folders in a directory on this machine's own disks.

Capabilities: none. Usage is a walk of the tree (exact, slow on big folders); the quota is
kept in the folder's metadata and enforced by the data plane (soft: a session writing
through its mount is not stopped). Only this host can mount the folders.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from services.storage.foldertree import Usage
from services.storage.volumes.base import Capability
from services.storage.volumes.tree import TreeVolume


class LocalVolume(TreeVolume):
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, name: str, root: Path, hostname: str) -> None:
        super().__init__(name, root)
        self.hostname = hostname

    def host_path(self, folder_id: str, host: str) -> PurePosixPath | None:
        if host != self.hostname:
            return None
        return PurePosixPath(self._path(folder_id))

    def usage(self, folder_id: str) -> Usage:
        return self.count(folder_id)

    def record_change(self, folder_id: str, change: Usage) -> None:
        """Nothing kept: every read walks the tree."""

    def recount(self, folder_id: str) -> Usage:
        return self.count(folder_id)
