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
    """What a folder holds (``usage``), or what a change added or freed (negative).

    - ``bytes``: apparent sizes of regular files, each file once whatever its names (as
      ``du``): its bytes are freed only with its last name;
    - ``files``: names of regular files (as ``find -type f``): a file with two names counts
      two. Names, not files, because a name is what the data plane adds and removes, and it
      is always known where a name is: a delete drops the count by the names it removed, and
      the count a fast-size backend keeps stays equal to a fresh walk;
    - ``links``: symlinks (their own names; never followed);
    - ``others``: every other entry but directories (FIFOs, sockets, devices).

    Directories are not counted. Positional construction is ``Usage(bytes, files)``."""

    bytes: int = 0
    files: int = 0
    links: int = 0
    others: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.bytes + other.bytes,
            self.files + other.files,
            self.links + other.links,
            self.others + other.others,
        )

    def __neg__(self) -> Usage:
        return Usage(-self.bytes, -self.files, -self.links, -self.others)


def one_name(info: os.stat_result) -> Usage:
    """What the name whose ``lstat`` is ``info`` counts on its own: what removing (or
    replacing) it frees. A file's bytes only if this is its last name (``st_nlink`` 1): the
    file's other names (in the same folder: a hard link cannot cross a mount, so a session
    cannot link into another folder) keep them."""
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return Usage(info.st_size if info.st_nlink <= 1 else 0, 1)
    if stat.S_ISLNK(mode):
        return Usage(links=1)
    if stat.S_ISDIR(mode):
        return Usage()
    return Usage(others=1)


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


@dataclass
class _Shared:
    """A regular file with more than one name, as a walk met it."""

    size: int
    nlink: int
    met: int = 0


def _count(dir_fd: int, max_depth: int) -> tuple[Usage, dict[tuple[int, int], _Shared]]:
    """Every name beneath ``dir_fd`` counted (``Usage``), the bytes of files with one name
    included; files with more (``st_nlink`` > 1) apart, by (device, inode), with how many of
    their names the walk met. Memory: one entry per multiply-linked file, none for the rest."""
    size, files, links, others = 0, 0, 0, 0
    shared: dict[tuple[int, int], _Shared] = {}
    if max_depth < 1:
        return Usage(), shared
    for entry in walk(dir_fd, max_depth):
        info = entry.info
        mode = info.st_mode
        if stat.S_ISREG(mode):
            files += 1
            if info.st_nlink <= 1:
                size += info.st_size
                continue
            key = (info.st_dev, info.st_ino)
            found = shared.setdefault(key, _Shared(info.st_size, info.st_nlink))
            found.met += 1
        elif stat.S_ISLNK(mode):
            links += 1
        elif not stat.S_ISDIR(mode):
            others += 1
    return Usage(size, files, links, others), shared


def usage(dir_fd: int, max_depth: int = MAX_DEPTH) -> Usage:
    """What the tree beneath ``dir_fd`` holds (``Usage`` says what each count means): a file
    with several names has its bytes counted once, at whichever name the walk meets first."""
    named, shared = _count(dir_fd, max_depth)
    return named + Usage(sum(file.size for file in shared.values()))


def _subtree(dir_fd: int, max_depth: int) -> Usage:
    """What deleting the whole tree beneath ``dir_fd`` frees: every name in it, and the bytes
    of files whose every name lies in it (the walk met as many names as ``st_nlink``); a file
    also named outside the tree keeps its bytes there."""
    named, shared = _count(dir_fd, max_depth)
    freed = sum(file.size for file in shared.values() if file.met >= file.nlink)
    return named + Usage(freed)


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
    """Remove ``path`` (a symlink itself, never its target); what it freed if ``count``, as
    ``usage`` counts (so a kept count moved by it equals a fresh walk). Entries deeper than
    ``MAX_DEPTH`` are in no count, so deleting them frees nothing counted."""
    if path.is_root:
        raise FolderFsError("is_root", 409, "the folder root cannot be deleted here")
    info = lstat(root_fd, path)
    if info is None:
        raise FolderFsError("not_found", 404, f"{str(path)!r} does not exist")
    depth = len(path.parts)
    with open_dir(root_fd, path.parent) as parent:
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(path.name, dir_fd=parent)
            return one_name(info) if depth <= MAX_DEPTH else Usage()
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
                # The folder's walk reaches MAX_DEPTH levels below its root: this many below here.
                removed = _subtree(fd, MAX_DEPTH - depth)
        try:
            shutil.rmtree(path.name, dir_fd=parent)
        except RecursionError:
            raise FolderFsError(
                "too_deep", 409, f"{str(path)!r} is nested too deeply to delete here"
            ) from None
        return removed
