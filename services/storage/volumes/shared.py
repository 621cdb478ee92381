"""The shared backend: an NFS/CephFS-style tree that every node mounts, each at its own path
(host name → mount path, ``"*"`` for the rest), so a folder can be mounted on any node.

Capabilities: ``fast_size``. Usage is the count kept in the folder's metadata: walked once,
then moved by every change the data plane makes (uploads, deletes). Writes a session makes
through its mount are seen at the next ``recount`` (the control plane asks for one when a
session that mounted the folder ends). The quota is enforced by the data plane, as local.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from services.storage.foldertree import Usage
from services.storage.volumes.base import Capability
from services.storage.volumes.kept import KeptCounts
from services.storage.volumes.tree import TreeVolume


def mount_for(mounts: dict[str, Path], host: str) -> Path | None:
    return mounts.get(host, mounts.get("*"))


class SharedVolume(TreeVolume):
    capabilities: frozenset[Capability] = frozenset({Capability.FAST_SIZE})

    def __init__(self, name: str, mounts: dict[str, Path], hostname: str) -> None:
        root = mount_for(mounts, hostname)
        if root is None:
            raise ValueError(
                f"volume {name!r} has no mount for host {hostname!r}: add it (or '*') to mounts"
            )
        super().__init__(name, root)
        self.mounts = dict(mounts)
        self.counts = KeptCounts(self.meta)

    def host_path(self, folder_id: str, host: str) -> PurePosixPath | None:
        mount = mount_for(self.mounts, host)
        return (
            None
            if mount is None
            else PurePosixPath(mount, self._path(folder_id).relative_to(self.root))
        )

    def usage(self, folder_id: str) -> Usage:
        self.folder_root(folder_id)
        return self.counts.read(folder_id, self.count)

    def record_change(self, folder_id: str, change: Usage) -> None:
        self.counts.move(folder_id, change)

    def recount(self, folder_id: str) -> Usage:
        return self.counts.keep(folder_id, self.count(folder_id))
