"""The btrfs backend's subvolumes as paths: made unless there, identified, and deleted with
every subvolume a session made inside them. Blocking: call from a thread."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from contextlib import suppress
from pathlib import Path

from services.storage.volumes.btrfs import ioctls

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_DELETE_ATTEMPTS = 5  # a session making subvolumes while its folder is removed: go again


class BtrfsVolumeError(RuntimeError):
    """The volume cannot be used as configured (said at start-up: ``BtrfsVolumeUnusable``),
    or a folder's place holds something that is not a subvolume."""


class BtrfsVolumeUnusable(BtrfsVolumeError):
    """Said at start-up: the root is missing, not on btrfs, or its quotas cannot be managed.
    A restart changes nothing until the operator does: ``jetyard serve`` says it in one line
    and exits ``STOPPED_FOR_GOOD``, and ``jetyard up`` does not start it again and again."""

    for_good = True


def is_subvolume(fd: int) -> bool:
    return os.fstat(fd).st_ino == ioctls.FIRST_FREE_OBJECTID


def ensure(path: Path) -> int:
    """Make subvolume ``path`` unless it exists (its parents as plain directories); its id."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parent = os.open(path.parent, DIR_FLAGS)
    try:
        with suppress(FileExistsError):  # made before, or meanwhile by another process
            ioctls.create_subvolume(parent, path.name)
        fd = os.open(path.name, DIR_FLAGS, dir_fd=parent)
    finally:
        os.close(parent)
    try:
        if not is_subvolume(fd):
            raise BtrfsVolumeError(f"{str(path)!r} exists as a plain directory, not a subvolume")
        return ioctls.root_id(fd)
    finally:
        os.close(fd)


def id_or_none(path: Path) -> int | None:
    """The id of subvolume ``path``; None if there is none there."""
    try:
        fd = os.open(path, DIR_FLAGS)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return None
        raise
    try:
        return ioctls.root_id(fd) if is_subvolume(fd) else None
    finally:
        os.close(fd)


def nested(fd: int, top: int) -> list[int]:
    """Every subvolume made inside ``top``, at any depth, each before those inside it."""
    found: list[int] = []
    stack = [top]
    while stack:
        children = ioctls.child_subvolumes(fd, stack.pop())
        found.extend(children)
        stack.extend(children)
    return found


def delete(fd: int, top: int, path: Path) -> None:
    """Delete subvolume ``top`` (at ``path``) with every subvolume inside it, innermost
    first: the kernel refuses to delete one that holds another."""
    for _ in range(_DELETE_ATTEMPTS):
        for subvolume in [*reversed(nested(fd, top)), top]:
            try:
                ioctls.delete_subvolume(fd, subvolume)
            except FileNotFoundError:
                continue
            except OSError as error:
                if error.errno != errno.ENOTEMPTY:
                    raise
                break  # one was made inside it meanwhile: find them again
        else:
            return
    raise BtrfsVolumeError(f"{str(path)!r} keeps gaining subvolumes: it could not be removed")


def remove_plain(path: Path) -> None:
    """Remove what lies at ``path`` though it is no subvolume (put there by hand), as the
    tree backends remove a folder."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(path)  # fd-based: planted symlinks are unlinked, never followed
    else:
        path.unlink()
