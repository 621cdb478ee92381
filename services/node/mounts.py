"""A kernel's folders on this machine: each ``Mount`` of its allocation resolved to the
directory it is bind-mounted from (``<volume root>/<folder_relpath(folder id)>``, the volume
roots from ``JETYARD_AGENT_VOLUMES``), and the check a backend makes before it mounts them.
Reads the file system (``lstat``); writes nothing.

The directories under a volume's root are the storage service's layout, so none of them may be
a symbolic link: a link there would mount whatever it points to (another folder, the host's
files). Each is checked with ``lstat``, never followed. The volume's root itself is the
administrator's choice and may be one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from schemas.vfolder import Mount, folder_relpath
from services.node.backend import HostMount, StartFailedError


def host_mounts(mounts: Iterable[Mount], volumes: Mapping[str, Path]) -> tuple[HostMount, ...]:
    """Where each folder lies on this machine; ``StartFailedError`` naming the folder and the
    volume when this node does not have its volume."""
    found = []
    for mount in mounts:
        root = volumes.get(mount.volume)
        if root is None:
            have = ", ".join(sorted(volumes)) or "none"
            raise StartFailedError(
                f"folder {mount.name} is on volume {mount.volume}, which this node does not "
                f"have (its volumes: {have}; JETYARD_AGENT_VOLUMES)"
            )
        found.append(
            HostMount(
                folder_id=mount.folder_id,
                name=mount.name,
                volume=mount.volume,
                root=root,
                relpath=folder_relpath(mount.folder_id),
                target=mount.path,
                read_only=mount.read_only,
            )
        )
    return tuple(found)


def check_host_mounts(mounts: Iterable[HostMount]) -> None:
    """Every folder's directory is there and real: ``StartFailedError`` saying which folder
    and volume when the volume's root is not a directory, or a directory of the layout is
    missing, is not a directory, or is a symbolic link."""
    for mount in mounts:
        where = f"folder {mount.name} on volume {mount.volume}"
        if not mount.root.is_dir():
            raise StartFailedError(
                f"{where}: the volume is not mounted on this node ({mount.root} is no directory)"
            )
        path = mount.root
        for part in mount.relpath.parts:
            path = path / part
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                raise StartFailedError(
                    f"{where}: its directory {mount.source} is missing on this node"
                ) from None
            except OSError as exc:
                raise StartFailedError(f"{where}: {path} cannot be read ({exc.strerror})") from None
            if stat.S_ISLNK(mode):
                raise StartFailedError(f"{where}: {path} is a symbolic link, not a directory")
            if not stat.S_ISDIR(mode):
                raise StartFailedError(f"{where}: {path} is not a directory")
