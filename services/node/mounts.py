"""A kernel's folders on this machine: each ``Mount`` of its allocation resolved to the
directory it is bind-mounted from (``<volume root>/<folder_relpath(folder id)>``, the volume
roots from ``JETYARD_AGENT_VOLUMES``), and the checks a backend makes before it mounts them.
Reads the file system (``lstat``, ``statvfs``); writes only a volume root's mode (private).

The directories under a volume's root are the storage service's layout, so none of them may be
a symbolic link: a link there would mount whatever it points to (another folder, the host's
files). Each is checked with ``lstat``, never followed. The volume's root itself is the
administrator's choice and may be one.

A kernel runs as root: a file it makes set-uid in a read-write folder is a set-uid-root program
on the host too, and a device node (were one made) a door to the host's devices. So a folder is
mounted read-write only where neither can act on the host (docs/node-agent.md, "What a session
may do"): its file system is mounted ``nosuid,nodev``, or the folder lies under a directory only
root or this agent's own user (who drives Docker, so is root already) can enter.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from schemas.vfolder import Mount, folder_relpath
from services.node.backend import HostMount, StartFailedError

log = logging.getLogger(__name__)


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
        if not mount.read_only:
            keep_inert(mount)


PRIVATE = 0o011
"""Search (x) for the group or others: a directory without either is entered by its owner only."""


def keep_inert(mount: HostMount) -> None:
    """Make sure what a kernel writes into ``mount`` (read-write) cannot run set-uid or act as
    a device on this host: its file system is ``nosuid,nodev``, or a directory on its real path
    is entered only by its owner, root or this agent's user. Where neither holds and this agent's
    user owns the volume's root, the root is made so (group and others lose all access) and a
    warning says so; otherwise ``StartFailedError`` says what to do."""
    flags = os.statvfs(mount.source).f_flag
    if flags & os.ST_NOSUID and flags & os.ST_NODEV:
        return
    if private_ancestor(Path(os.path.realpath(mount.source))) is not None:
        return
    root = Path(os.path.realpath(mount.root))
    info = os.stat(root)
    private = stat.S_IMODE(info.st_mode) & ~0o077
    try:
        if info.st_uid != os.geteuid():
            raise PermissionError(f"owned by uid {info.st_uid}")
        os.chmod(root, private)
    except OSError as exc:
        raise StartFailedError(
            f"folder {mount.name} on volume {mount.volume}: what a session writes there could "
            f"run set-uid on this host ({root} is mounted without nosuid,nodev, other users can "
            f"enter it, and this agent cannot close it: {exc}): mount it nosuid,nodev, or keep "
            f"it under a directory only root or uid {os.geteuid()} can enter"
        ) from None
    log.warning(
        "volume %s: %s was open to other users of this host and is mounted without "
        "nosuid,nodev; made it private (mode %o) so nothing a session writes there runs "
        "set-uid or as a device for them (docs/node-agent.md)",
        mount.volume,
        root,
        private,
    )


def private_ancestor(path: Path) -> Path | None:
    """The nearest directory at or above ``path`` that only root or this process's user can
    enter (None: everyone can reach ``path``, as far as modes say)."""
    trusted = {0, os.geteuid()}
    for directory in (path, *path.parents):
        info = os.stat(directory)
        if info.st_uid in trusted and not info.st_mode & PRIVATE:
            return directory
    return None
