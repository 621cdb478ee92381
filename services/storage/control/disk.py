"""Folders on disk as the log says they are: made on their volume with their quota, removed
when purged, and the copy a clone makes. Blocking I/O: call from a thread. Idempotent: a
replay after a restart does every step again harmlessly.

Copies never follow a symlink: every entry is reached from its parent's descriptor with
``O_NOFOLLOW``; a symlink is copied as a symlink (its target text, never what it points at),
anything that is neither a file, a directory nor a symlink (FIFOs, devices) is left out, and
the walk stops ``MAX_DEPTH`` levels deep, as usage counts and archives do.
"""

from __future__ import annotations

import errno
import os
import stat
import threading

from commands.folders.aggregate import VFolder
from schemas.vfolder import FolderStatus
from services.storage.folderfs import open_root
from services.storage.foldertree import MAX_DEPTH, Usage, walk
from services.storage.volumes import Volume

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_COPY_BYTES = 8 * 1024 * 1024


class CopyStopped(Exception):
    """The service is stopping: the clone is copied again from scratch at the next start."""


def materialise(volume: Volume, folder: VFolder) -> None:
    """Make ``folder``'s bytes match its state: removed once purged, else present with its
    quota (a CLONING folder is the clone's to make)."""
    if folder.status is FolderStatus.PURGED:
        volume.remove_folder(folder.id)
    elif folder.status is not FolderStatus.CLONING:
        volume.create_folder(folder.id)
        if volume.quota(folder.id) != folder.quota_bytes:
            volume.set_quota(folder.id, folder.quota_bytes)


def clone(
    source: Volume, source_id: str, target: Volume, target_id: str, stop: threading.Event
) -> Usage:
    """Copy ``source_id``'s tree into ``target_id``, made afresh (what an interrupted copy
    left is removed first); what was copied."""
    target.remove_folder(target_id)
    target.create_folder(target_id)
    source_root, target_root = source.folder_root(source_id), target.folder_root(target_id)
    with open_root(source_root) as src, open_root(target_root) as dst:
        return copy_tree(src, dst, stop)


def copy_tree(src_root: int, dst_root: int, stop: threading.Event) -> Usage:
    """Copy what ``foldertree.walk`` meets beneath ``src_root`` into ``dst_root``: each entry
    from its parent's descriptor in the source, into the matching directory of the target
    (held on a stack as deep as the walk is: it goes parents first, depth first). What was
    copied is counted as ``foldertree.usage`` would count the copy: each name of a hard-linked
    file is copied as a file of its own."""
    copied = Usage()
    targets = [os.dup(dst_root)]  # targets[d]: the target directory of the entries d+1 deep
    try:
        for entry in walk(src_root):
            if stop.is_set():
                raise CopyStopped
            depth, name, info = len(entry.parts), entry.parts[-1], entry.info
            while len(targets) > depth:
                os.close(targets.pop())
            dst = targets[-1]
            if stat.S_ISDIR(info.st_mode):
                if depth >= MAX_DEPTH:
                    continue  # not descended by the walk: left out, as usage does
                os.mkdir(name, stat.S_IMODE(info.st_mode) | 0o700, dir_fd=dst)
                targets.append(os.open(name, _DIR, dir_fd=dst))
            elif stat.S_ISREG(info.st_mode):
                copied += Usage(_copy_file(name, entry.dir_fd, dst, stop), 1)
            elif stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(name, dir_fd=entry.dir_fd), name, dir_fd=dst)
                copied += Usage(links=1)
    finally:
        for fd in targets:
            os.close(fd)
    return copied


def _copy_file(name: str, src_dir: int, dst_dir: int, stop: threading.Event) -> int:
    """Copy regular file ``name`` (opened without following a link, and only if it still is
    a regular file: a FIFO swapped in would block us); its size."""
    try:
        src = os.open(name, _READ, dir_fd=src_dir)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOENT):
            return 0  # swapped for a symlink, or removed, since the walk saw it
        raise
    try:
        info = os.fstat(src)
        if not stat.S_ISREG(info.st_mode):
            return 0
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        dst = os.open(name, flags, stat.S_IMODE(info.st_mode), dir_fd=dst_dir)
        try:
            return _copy_bytes(src, dst, stop)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_bytes(src: int, dst: int, stop: threading.Event) -> int:
    total = 0
    while True:
        if stop.is_set():
            raise CopyStopped
        try:
            moved = os.copy_file_range(src, dst, _COPY_BYTES)
        except OSError as error:
            if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            chunk = os.read(src, _COPY_BYTES)
            moved = len(chunk)
            view = memoryview(chunk)
            while view:
                view = view[os.write(dst, view) :]
        if moved == 0:
            return total
        total += moved
