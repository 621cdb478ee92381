"""A directory of a folder as a tar stream (POSIX pax), produced while it is sent: never
built in memory or in a temporary file. Regular files and directories only: symlinks and
special files are left out (a symlink a session planted would point anywhere on the
machine that unpacks the archive); entries deeper than ``foldertree.MAX_DEPTH`` too.

A file that changes while it is read is sent with the size it had when opened: cut, or
padded with zeros, so the archive stays well formed.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path

from schemas.folder_paths import FolderPath
from services.storage import folderfs, foldertree

BLOCK = tarfile.BLOCKSIZE
RECORD = tarfile.RECORDSIZE
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _header(name: str, info: os.stat_result, kind: bytes, size: int) -> bytes:
    entry = tarfile.TarInfo(name)
    entry.type = kind
    entry.size = size
    entry.mode = stat.S_IMODE(info.st_mode)
    entry.mtime = int(info.st_mtime)
    entry.uid, entry.gid = info.st_uid, info.st_gid
    return entry.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


class _Out:
    """Collects archive bytes and hands them on in pieces of about ``chunk_bytes``."""

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self.buffer = bytearray()
        self.total = 0

    def put(self, data: bytes) -> Iterator[bytes]:
        self.buffer += data
        self.total += len(data)
        if len(self.buffer) >= self.chunk_bytes:
            ready, self.buffer = bytes(self.buffer), bytearray()
            yield ready


def tar_chunks(root: Path, path: FolderPath, top: str, chunk_bytes: int) -> Iterator[bytes]:
    """The tar of directory ``path`` with its entries under ``top/``."""
    out = _Out(chunk_bytes)
    with folderfs.open_root(root) as root_fd, folderfs.open_dir(root_fd, path) as dir_fd:
        yield from out.put(_header(top, os.fstat(dir_fd), tarfile.DIRTYPE, 0))
        for entry in foldertree.walk(dir_fd):
            name = "/".join((top, *entry.parts))
            if stat.S_ISDIR(entry.info.st_mode):
                yield from out.put(_header(name, entry.info, tarfile.DIRTYPE, 0))
            elif stat.S_ISREG(entry.info.st_mode):
                yield from _file(out, name, entry)
        for piece in (bytes(2 * BLOCK), bytes(-(out.total + 2 * BLOCK) % RECORD)):
            yield from out.put(piece)
    if out.buffer:
        yield bytes(out.buffer)


def _file(out: _Out, name: str, entry: foldertree.TreeEntry) -> Iterator[bytes]:
    try:
        fd = os.open(entry.parts[-1], _READ_FLAGS, dir_fd=entry.dir_fd)
    except OSError:  # gone, swapped for a symlink, or not ours to read: left out
        return
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_ino != entry.info.st_ino:
            return
        yield from out.put(_header(name, info, tarfile.REGTYPE, info.st_size))
        left = info.st_size
        while left:
            data = os.read(fd, min(out.chunk_bytes, left)) or bytes(min(out.chunk_bytes, left))
            left -= len(data)
            yield from out.put(data)
        yield from out.put(bytes(-info.st_size % BLOCK))
    finally:
        os.close(fd)
