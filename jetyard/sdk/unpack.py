"""Unpacking a folder's archive (a tar stream) on the user's machine, safely: every member
must name a path beneath the archive's one top directory by the folder path rules
(``schemas.folder_paths``: no ``..``, no absolute path, no backslash or look-alike), and be a
regular file or a directory. A link, a device, a FIFO, a member outside the top, or one
named twice stops the unpack with an error, and nothing is left: the tree is built in a
hidden directory beside the target, created empty by us, and renamed into place only when
the whole archive passed. Nothing in that directory is ever a link, so no write follows one.

The archive arrives through an ``ArchiveFeed``: the network side puts chunks, a thread reads
them as a file; a few chunks are held at most, whatever the archive's size.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import secrets
import shutil
import tarfile
import threading
from pathlib import Path

from jetyard.sdk.errors import JetyardError
from schemas.folder_paths import UnsafePath, parse_path

_COPY_BYTES = 1 << 20


class UnsafeArchive(JetyardError):
    """An archive member that would escape the target, or is not a plain file or directory."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="unsafe_archive")


class ArchiveFeed(io.RawIOBase):
    """Chunks handed from the network (``put``) to a reader thread (``readinto``)."""

    def __init__(self, depth: int = 4) -> None:
        super().__init__()
        self._chunks: queue.Queue[bytes | BaseException | None] = queue.Queue(depth)
        self._view = memoryview(b"")
        self._ended = False
        self.reader_gone = threading.Event()

    def readable(self) -> bool:
        return True

    def put(self, chunk: bytes) -> bool:
        """Hand on a chunk (blocking while the reader is behind); False if the reader has
        stopped and wants no more."""
        return self._hand(chunk)

    def fail(self, error: BaseException) -> None:
        self._hand(error)

    def close(self) -> None:
        if not self.closed:
            self._hand(None)
        super().close()

    def _hand(self, item: bytes | BaseException | None) -> bool:
        while not self.reader_gone.is_set():
            try:
                self._chunks.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._view and not self._ended:
            item = self._chunks.get()
            if item is None:
                self._ended = True
            elif isinstance(item, BaseException):
                self._ended = True
                raise item
            else:
                self._view = memoryview(item)
        count = min(len(buffer), len(self._view))
        buffer[:count] = self._view[:count]
        self._view = self._view[count:]
        return count


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.isdev():
        return "a device or FIFO"
    return "not a regular file or directory"


def _relative(member: tarfile.TarInfo, top: str | None) -> tuple[str, tuple[str, ...]]:
    """The member's top directory and its path beneath it, or ``UnsafeArchive``."""
    try:
        parts = parse_path(member.name.rstrip("/")).parts
    except UnsafePath as exc:
        raise UnsafeArchive(
            f"archive member {member.name[:200]!r} refused: {exc.message}"
        ) from None
    if not parts:
        raise UnsafeArchive("an archive member names the root")
    if top is not None and parts[0] != top:
        raise UnsafeArchive(f"archive member {member.name[:200]!r} lies outside {top!r}")
    return parts[0], parts[1:]


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    source = tar.extractfile(member)
    assert source is not None  # a regular file always has one
    mode = 0o755 if member.mode & 0o100 else 0o644
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, mode)
    except FileExistsError:
        raise UnsafeArchive(f"archive member {member.name[:200]!r} appears twice") from None
    with os.fdopen(fd, "wb") as out:
        while piece := source.read(_COPY_BYTES):
            out.write(piece)
    os.utime(target, (member.mtime, member.mtime))


def _unpack(feed: io.RawIOBase, staging: Path) -> None:
    top: str | None = None
    # "r|": a stream, read once front to back; nothing is kept but the current member.
    with tarfile.open(fileobj=feed, mode="r|") as tar:
        for member in tar:
            if not (member.isdir() or member.isreg()):
                raise UnsafeArchive(f"archive member {member.name[:200]!r} is {_kind(member)}")
            first, parts = _relative(member, top)
            if top is None:
                if parts or not member.isdir():
                    raise UnsafeArchive("an archive must start with its top directory")
                top = first
                continue
            target = staging.joinpath(*parts)
            if member.isdir():
                target.mkdir(mode=0o755, parents=True, exist_ok=True)
                if target.is_symlink() or not target.is_dir():
                    raise UnsafeArchive(f"archive member {member.name[:200]!r} appears twice")
            else:
                target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                _write(tar, member, target)


def unpack_into(feed: ArchiveFeed, target: Path) -> None:
    """Read the archive from ``feed`` into the new directory ``target`` (its top directory's
    contents), all or nothing."""
    staging = target.parent / f".{target.name}.jetyard-unpack-{secrets.token_hex(4)}"
    try:
        staging.mkdir(mode=0o700)
        _unpack(feed, staging)
        staging.chmod(0o755)
        os.rename(staging, target)
    except tarfile.TarError as exc:
        raise JetyardError(f"the archive cannot be read: {exc}") from exc
    finally:
        feed.reader_gone.set()
        if staging.exists():
            with contextlib.suppress(OSError):
                shutil.rmtree(staging)
