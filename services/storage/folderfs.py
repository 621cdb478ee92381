"""A folder's tree on disk, reached only through directory file descriptors.

Every path is walked one component at a time from the folder root's descriptor with
``O_NOFOLLOW`` (``openat`` style, ``dir_fd=``), so a symlink a session planted anywhere in
the path is refused, even one pointing inside the folder: the kernel never resolves a name
with a slash in it on our behalf. Only ``delete`` and ``move`` accept a symlink as the *last*
component, because they act on the link itself (unlink, rename) and never follow it.

Files are opened for reading only when they are regular files: a FIFO would block the
reader, a device node would stream the host's disk. Blocking calls: run them in a thread.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from schemas.folder_paths import FolderPath, check_new_name

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class FolderFsError(Exception):
    """A filesystem operation refused; ``code`` and ``status`` become the HTTP error."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


def _not_found(path: FolderPath) -> FolderFsError:
    return FolderFsError("not_found", 404, f"{str(path) or 'the folder root'!r} does not exist")


def _symlink(path: FolderPath) -> FolderFsError:
    return FolderFsError(
        "symlink_refused", 403, f"{str(path)!r} is or passes through a symlink, never followed"
    )


def _open_child_dir(dir_fd: int, name: str, path: FolderPath) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise _not_found(path) from None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            # O_NOFOLLOW|O_DIRECTORY on a symlink answers ELOOP (or ENOTDIR on some kernels).
            if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                raise _symlink(path) from None
            raise FolderFsError(
                "not_a_directory", 409, f"{str(path)!r} is not a directory"
            ) from None
        raise


@contextmanager
def open_root(root: os.PathLike[str] | str) -> Iterator[int]:
    """The folder root's descriptor (the root itself must not be a symlink either)."""
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        raise FolderFsError("folder_not_found", 404, "the folder does not exist") from None
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def open_dir(root_fd: int, path: FolderPath, *, make: bool = False) -> Iterator[int]:
    """The descriptor of directory ``path``; ``make`` creates missing components (NFC only)."""
    fd = os.dup(root_fd)
    try:
        for depth, name in enumerate(path.parts, start=1):
            here = FolderPath(path.parts[:depth])
            try:
                child = _open_child_dir(fd, name, here)
            except FolderFsError as error:
                if not (make and error.code == "not_found"):
                    raise
                with suppress(FileExistsError):  # made meanwhile by another writer: fine
                    os.mkdir(check_new_name(name), dir_fd=fd)
                child = _open_child_dir(fd, name, here)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def lstat(root_fd: int, path: FolderPath) -> os.stat_result | None:
    """The entry itself (a symlink is not followed), or None if it does not exist."""
    if path.is_root:
        return os.fstat(root_fd)
    with open_dir(root_fd, path.parent) as parent:
        try:
            return os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None


def open_for_reading(root_fd: int, path: FolderPath) -> tuple[int, os.stat_result]:
    """A read descriptor on regular file ``path`` and its stat; the caller closes it."""
    if path.is_root:
        raise FolderFsError("is_a_directory", 409, "the folder root is a directory")
    with open_dir(root_fd, path.parent) as parent:
        try:
            before = os.stat(path.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            raise _not_found(path) from None
        if stat.S_ISLNK(before.st_mode):
            raise _symlink(path)
        if stat.S_ISDIR(before.st_mode):
            raise FolderFsError("is_a_directory", 409, f"{str(path)!r} is a directory")
        if not stat.S_ISREG(before.st_mode):
            raise FolderFsError("not_a_file", 409, f"{str(path)!r} is not a regular file")
        # O_NONBLOCK: if the entry was swapped for a FIFO since the stat, open must not hang.
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            fd = os.open(path.name, flags, dir_fd=parent)
        except FileNotFoundError:
            raise _not_found(path) from None
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise _symlink(path) from None
            raise
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode):
        os.close(fd)
        raise FolderFsError("not_a_file", 409, f"{str(path)!r} is not a regular file")
    return fd, opened


def make_dir(root_fd: int, path: FolderPath, *, parents: bool) -> None:
    if path.is_root:
        raise FolderFsError("exists", 409, "the folder root already exists")
    with open_dir(root_fd, path.parent, make=parents) as parent:
        try:
            os.mkdir(check_new_name(path.name), dir_fd=parent)
        except FileExistsError:
            if parents and stat.S_ISDIR(
                os.stat(path.name, dir_fd=parent, follow_symlinks=False).st_mode
            ):
                return
            raise FolderFsError("exists", 409, f"{str(path)!r} already exists") from None


def move(root_fd: int, source: FolderPath, target: FolderPath) -> None:
    """Rename within the folder; the target must not exist (no silent replacement)."""
    if source.is_root or target.is_root:
        raise FolderFsError("is_root", 409, "the folder root cannot be moved or replaced")
    if target.is_within(source):
        raise FolderFsError("into_itself", 409, "a directory cannot be moved into itself")
    check_new_name(target.name)
    with open_dir(root_fd, source.parent) as src, open_dir(root_fd, target.parent) as dst:
        try:
            os.stat(source.name, dir_fd=src, follow_symlinks=False)
        except FileNotFoundError:
            raise _not_found(source) from None
        try:
            os.stat(target.name, dir_fd=dst, follow_symlinks=False)
        except FileNotFoundError:
            pass
        else:
            raise FolderFsError("exists", 409, f"{str(target)!r} already exists")
        # A race with a writer creating the target between the check and the rename can
        # replace a file they just made; a directory target that appeared fails the rename.
        os.rename(source.name, target.name, src_dir_fd=src, dst_dir_fd=dst)


def place_file(
    area_fd: int, temp_name: str, root_fd: int, target: FolderPath
) -> os.stat_result | None:
    """Rename a finished temp file into ``target`` (parents made as needed); an existing
    regular file there is replaced and its stat returned, anything else refuses. Where the
    rename cannot cross from the upload area into the folder (btrfs subvolumes), the file
    is cloned across instead (``_clone_into``)."""
    if target.is_root:
        raise FolderFsError("is_a_directory", 409, "the folder root is a directory")
    with open_dir(root_fd, target.parent, make=True) as parent:
        try:
            old = os.stat(target.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise _symlink(target)
        if old is not None and not stat.S_ISREG(old.st_mode):
            raise FolderFsError("exists", 409, f"{str(target)!r} exists and is not a file")
        name = check_new_name(target.name)
        try:
            os.rename(temp_name, name, src_dir_fd=area_fd, dst_dir_fd=parent)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
            _clone_into(area_fd, temp_name, parent, name, error)
        return old


# ioctl FICLONE (linux/fs.h): share the source's extents, copying no data (btrfs, XFS).
_FICLONE = 0x40049409


def _clone_into(area_fd: int, temp_name: str, parent: int, name: str, refused: OSError) -> None:
    """Move ``temp_name`` into ``parent`` as ``name`` where a rename cannot (``EXDEV``): clone
    it into a new hidden file beside the target, make that durable, rename it over the
    target (so readers see the old file or the new one, never a part), unlink the source. A
    filesystem that cannot clone across either raises the rename's ``refused``. A crash
    before the rename can leave the hidden ``.jetyard-*.tmp`` file behind."""
    source = os.open(temp_name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=area_fd)
    try:
        hidden = f".jetyard-{secrets.token_hex(8)}.tmp"
        mode = stat.S_IMODE(os.fstat(source).st_mode)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        clone = os.open(hidden, flags, mode, dir_fd=parent)
        try:
            try:
                fcntl.ioctl(clone, _FICLONE, source)
            except OSError as error:
                if error.errno in (errno.EXDEV, errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL):
                    raise refused from None
                raise
            os.fsync(clone)
            os.rename(hidden, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(hidden, dir_fd=parent)
            raise
        finally:
            os.close(clone)
    finally:
        os.close(source)
    os.unlink(temp_name, dir_fd=area_fd)


def check_creatable(root_fd: int, target: FolderPath) -> None:
    """Refuse now what ``place_file`` would refuse at the end of an upload: a parent that is
    a symlink or a file, a target that is a symlink or not a file, a missing parent whose
    name could not be made. Missing parents are fine: they are made at the end."""
    if target.is_root:
        raise FolderFsError("is_a_directory", 409, "the folder root is a directory")
    check_new_name(target.name)
    fd = os.dup(root_fd)
    try:
        parents = target.parent.parts
        for depth, name in enumerate(parents, start=1):
            try:
                child = _open_child_dir(fd, name, FolderPath(parents[:depth]))
            except FolderFsError as error:
                if error.code != "not_found":
                    raise
                for missing in parents[depth - 1 :]:
                    check_new_name(missing)
                return
            os.close(fd)
            fd = child
        try:
            info = os.stat(target.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(info.st_mode):
            raise _symlink(target)
        if not stat.S_ISREG(info.st_mode):
            raise FolderFsError("exists", 409, f"{str(target)!r} exists and is not a file")
    finally:
        os.close(fd)
