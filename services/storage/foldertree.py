"""Whole directories of a folder: listing, walking (usage, archives) and deleting, all from
directory descriptors, never following a symlink (see ``folderfs`` for the walk rules)."""

from __future__ import annotations

import errno
import heapq
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from schemas.folder_paths import FolderPath, is_safe_name
from services.storage.folderfs import (
    FolderFsError,
    lstat,
    open_dir,
)

# A walk descends at most this deep (each level holds a descriptor); deeper entries are left
# out of usage counts and archives. A session could otherwise exhaust descriptors with a
# directory chain thousands of levels deep.
MAX_DEPTH = 256

# shutil.rmtree only refuses to follow symlinks planted mid-deletion where it is fd-based.
if not shutil.rmtree.avoids_symlink_attacks:  # pragma: no cover - Linux always has it
    raise RuntimeError("this platform's shutil.rmtree can follow symlinks: not safe here")


@dataclass(frozen=True)
class TreeEntry:
    """One entry met by ``walk``; ``dir_fd`` holds it and is valid until the next entry."""

    parts: tuple[str, ...]
    info: os.stat_result
    dir_fd: int


@dataclass(frozen=True)
class Usage:
    bytes: int = 0
    files: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.bytes + other.bytes, self.files + other.files)

    def __neg__(self) -> Usage:
        return Usage(-self.bytes, -self.files)


@dataclass(frozen=True)
class Listed:
    name: str
    kind: str
    size: int
    mtime: str
    safe: bool


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def walk(dir_fd: int, max_depth: int = MAX_DEPTH) -> Iterator[TreeEntry]:
    """Every entry beneath ``dir_fd``, parents before children, symlinks never followed.
    Iterative (an explicit stack), so depth costs descriptors, not Python frames."""
    first = os.dup(dir_fd)
    stack: list[tuple[int, Iterator[os.DirEntry[str]], tuple[str, ...]]] = []
    try:
        stack.append((first, os.scandir(first), ()))
    except BaseException:
        os.close(first)
        raise
    try:
        while stack:
            fd, entries, parts = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                os.close(fd)
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # removed while we walk
                continue
            here = (*parts, entry.name)
            yield TreeEntry(here, info, fd)
            if stat.S_ISDIR(info.st_mode) and len(stack) < max_depth:
                try:
                    child = os.open(
                        entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd
                    )
                except OSError:  # swapped for a symlink or removed since the stat
                    continue
                try:
                    stack.append((child, os.scandir(child), here))
                except BaseException:
                    os.close(child)
                    raise
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def usage(dir_fd: int) -> Usage:
    """Bytes (apparent sizes of regular files) and files (every entry but directories)."""
    total, files = 0, 0
    for entry in walk(dir_fd):
        if stat.S_ISDIR(entry.info.st_mode):
            continue
        files += 1
        if stat.S_ISREG(entry.info.st_mode):
            total += entry.info.st_size
    return Usage(total, files)


def _listed(entry: os.DirEntry[str]) -> Listed | None:
    try:
        info = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None
    # A name that is not UTF-8 on disk is shown with U+FFFD (JSON cannot carry it as is).
    shown = entry.name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return Listed(
        name=shown,
        kind=kind_of(info.st_mode),
        size=info.st_size,
        mtime=datetime.fromtimestamp(info.st_mtime, UTC).isoformat(),
        safe=shown == entry.name and is_safe_name(entry.name),
    )


def list_dir(
    root_fd: int, path: FolderPath, *, after: str, limit: int
) -> tuple[list[Listed], bool]:
    """One page of ``path``'s entries in byte order of their names, from the first after
    ``after``; and whether more follow. Memory holds one page, whatever the directory."""
    after_key = os.fsencode(after)
    with open_dir(root_fd, path) as fd, os.scandir(fd) as entries:
        page = heapq.nsmallest(
            limit + 1,
            (entry for entry in entries if os.fsencode(entry.name) > after_key),
            key=lambda entry: os.fsencode(entry.name),
        )
        # DirEntry.stat reads through the directory's descriptor: before it closes.
        listed = [item for item in map(_listed, page[:limit]) if item is not None]
    return listed, len(page) > limit


def delete(root_fd: int, path: FolderPath, *, recursive: bool, count: bool) -> Usage:
    """Remove ``path`` (a symlink itself, never its target); what it held if ``count``."""
    if path.is_root:
        raise FolderFsError("is_root", 409, "the folder root cannot be deleted here")
    info = lstat(root_fd, path)
    if info is None:
        raise FolderFsError("not_found", 404, f"{str(path)!r} does not exist")
    with open_dir(root_fd, path.parent) as parent:
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(path.name, dir_fd=parent)
            size = info.st_size if stat.S_ISREG(info.st_mode) else 0
            return Usage(size, 1)
        if not recursive:
            try:
                os.rmdir(path.name, dir_fd=parent)
            except OSError as error:
                if error.errno == errno.ENOTEMPTY:
                    raise FolderFsError(
                        "not_empty", 409, f"{str(path)!r} is not empty: delete it recursively"
                    ) from None
                raise
            return Usage()
        removed = Usage()
        if count:
            with open_dir(root_fd, path) as fd:
                removed = usage(fd)
        try:
            shutil.rmtree(path.name, dir_fd=parent)
        except RecursionError:
            raise FolderFsError(
                "too_deep", 409, f"{str(path)!r} is nested too deeply to delete here"
            ) from None
        return removed
