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
from services.storage.volumes.meta import COUNT_RULES, FolderMeta
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

    def host_path(self, folder_id: str, host: str) -> PurePosixPath | None:
        mount = mount_for(self.mounts, host)
        return (
            None
            if mount is None
            else PurePosixPath(mount, self._path(folder_id).relative_to(self.root))
        )

    def usage(self, folder_id: str) -> Usage:
        meta = self.meta.read(folder_id)
        if not meta.counts_current:
            return self.recount(folder_id)
        self.folder_root(folder_id)
        return Usage(meta.bytes, meta.files, meta.links, meta.others)

    def record_change(self, folder_id: str, change: Usage) -> None:
        def moved(meta: FolderMeta) -> FolderMeta:
            if not meta.counts_current:
                return meta  # the next usage() walks anyway
            return meta.model_copy(
                update={
                    "bytes": max(0, meta.bytes + change.bytes),
                    "files": max(0, meta.files + change.files),
                    "links": max(0, meta.links + change.links),
                    "others": max(0, meta.others + change.others),
                }
            )

        self.meta.update(folder_id, moved)

    def recount(self, folder_id: str) -> Usage:
        counted = self.count(folder_id)
        self.meta.update(
            folder_id,
            lambda meta: meta.model_copy(
                update={
                    "bytes": counted.bytes,
                    "files": counted.files,
                    "links": counted.links,
                    "others": counted.others,
                    "counted": True,
                    "count_rules": COUNT_RULES,
                }
            ),
        )
        return counted
