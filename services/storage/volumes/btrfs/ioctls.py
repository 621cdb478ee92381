"""The kernel calls of the btrfs backend: ioctls on directory descriptors, so nothing parses
the output of btrfs-progs (which the service does not need at run time) and every refusal
arrives as an errno. Layouts are those of ``linux/btrfs.h`` and ``linux/btrfs_tree.h``.

Subvolumes are made and deleted by name under a parent's descriptor or by id, never by a
path the kernel resolves, so a symlink planted in a folder is never followed. Making a
subvolume, ``root_id``, ``fsid`` and ``commit`` need no privilege (a session can make
subvolumes too); the rest need ``CAP_SYS_ADMIN``. Blocking: call from a thread.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
import uuid
from collections.abc import Iterator

FIRST_FREE_OBJECTID = 256  # the inode number of every subvolume's root directory
_U64_MAX = 2**64 - 1


def _ioc(direction: int, number: int, size: int) -> int:
    return (direction << 30) | (size << 16) | (0x94 << 8) | number


_W, _R, _RW = 1, 2, 3
_SYNC = _ioc(0, 8, 0)
_SUBVOL_CREATE = _ioc(_W, 14, 4096)
_TREE_SEARCH = _ioc(_RW, 17, 4096)
_INO_LOOKUP = _ioc(_RW, 18, 4096)
_WAIT_SYNC = _ioc(_W, 22, 8)
_START_SYNC = _ioc(_R, 24, 8)
_FS_INFO = _ioc(_R, 31, 1024)
_QUOTA_CTL = _ioc(_RW, 40, 16)
_QGROUP_ASSIGN = _ioc(_W, 41, 24)
_QGROUP_CREATE = _ioc(_W, 42, 16)
_QGROUP_LIMIT = _ioc(_R, 43, 48)
_QUOTA_RESCAN = _ioc(_W, 44, 64)
_SNAP_DESTROY_V2 = _ioc(_W, 63, 4096)

_QUOTA_CTL_ENABLE = 1
_SUBVOL_SPEC_BY_ID = 1 << 4
_LIMIT_MAX_RFER = 1
_ROOT_TREE, _QUOTA_TREE = 1, 8
_ROOT_REF_KEY, _QGROUP_RELATION_KEY = 156, 246
_SEARCH_KEY = struct.Struct("=7Q4I4Q")  # btrfs_ioctl_search_key: 104 bytes
_SEARCH_HEADER = struct.Struct("=3Q2I")  # transid, objectid, offset, type, len


def qgroup_id(level: int, number: int) -> int:
    """The kernel's qgroup id: the level in the top 16 bits (``1/256`` is ``1 << 48 | 256``)."""
    return (level << 48) | number


def qgroup_name(group: int) -> str:
    """``<level>_<id>``, the name of the qgroup's directory in sysfs."""
    return f"{group >> 48}_{group & (2**48 - 1)}"


def _call(fd: int, request: int, args: bytes | bytearray) -> bytearray:
    buffer = bytearray(args)
    fcntl.ioctl(fd, request, buffer)
    return buffer


def fsid(fd: int) -> str:
    """The filesystem's uuid (its directory in ``/sys/fs/btrfs``); ``ENOTTY`` if ``fd`` is
    not on btrfs."""
    info = _call(fd, _FS_INFO, bytes(1024))
    return str(uuid.UUID(bytes=bytes(info[16:32])))


def root_id(fd: int) -> int:
    """The id of the subvolume that holds directory ``fd``."""
    args = _call(fd, _INO_LOOKUP, struct.pack("=QQ", 0, FIRST_FREE_OBJECTID).ljust(4096, b"\0"))
    number: int = struct.unpack_from("=Q", args)[0]
    return number


def _named(name: str, size: int, at: int) -> bytearray:
    encoded = os.fsencode(name)
    if not encoded or b"/" in encoded or len(encoded) > 255:
        raise ValueError(f"{name!r} is not a single name")
    args = bytearray(size)
    args[at : at + len(encoded)] = encoded
    return args


def create_subvolume(parent_fd: int, name: str) -> None:
    """A new empty subvolume ``name`` in directory ``parent_fd`` (``EEXIST`` if taken)."""
    _call(parent_fd, _SUBVOL_CREATE, _named(name, 4096, 8))


def delete_subvolume(fd: int, subvolume: int) -> None:
    """Delete subvolume ``subvolume`` (any ``fd`` on the filesystem): its files go with it,
    freed by the kernel's cleaner in the background. ``ENOTEMPTY`` while it holds another
    subvolume, ``ENOENT`` if it is gone."""
    args = bytearray(4096)
    struct.pack_into("=qQQ", args, 0, 0, 0, _SUBVOL_SPEC_BY_ID)
    struct.pack_into("=Q", args, 56, subvolume)
    _call(fd, _SNAP_DESTROY_V2, args)


def _search(fd: int, tree: int, objectid: int, kind: int) -> Iterator[int]:
    """The offsets of the items ``(objectid, kind, *)`` of ``tree``, in order."""
    offset = 0
    while True:
        key = _SEARCH_KEY.pack(
            tree, objectid, objectid, offset, _U64_MAX, 0, _U64_MAX, kind, kind, 4096, 0, 0, 0, 0, 0
        )
        args = _call(fd, _TREE_SEARCH, key.ljust(4096, b"\0"))
        found: int = struct.unpack_from("=I", args, 64)[0]
        at = _SEARCH_KEY.size
        for _ in range(found):
            _, _, offset, _, length = _SEARCH_HEADER.unpack_from(args, at)
            at += _SEARCH_HEADER.size + length
            yield offset
        if found == 0 or offset == _U64_MAX:
            return
        offset += 1


def child_subvolumes(fd: int, subvolume: int) -> list[int]:
    """The subvolumes made directly inside ``subvolume`` (its root references)."""
    return list(_search(fd, _ROOT_TREE, subvolume, _ROOT_REF_KEY))


def qgroup_relations(fd: int, group: int) -> list[int]:
    """The qgroups related to ``group``: its members and the groups it belongs to."""
    return list(_search(fd, _QUOTA_TREE, group, _QGROUP_RELATION_KEY))


def enable_quota(fd: int) -> None:
    _call(fd, _QUOTA_CTL, struct.pack("=QQ", _QUOTA_CTL_ENABLE, 0))


def start_rescan(fd: int) -> bool:
    """Recount every qgroup from the extents, in the background: what makes inconsistent
    figures right again. False if a rescan was already running (turning quotas on starts
    one)."""
    try:
        _call(fd, _QUOTA_RESCAN, bytes(64))
    except OSError as error:
        if error.errno != errno.EINPROGRESS:
            raise
        return False
    return True


def create_qgroup(fd: int, group: int) -> None:
    _call(fd, _QGROUP_CREATE, struct.pack("=QQ", 1, group))


def destroy_qgroup(fd: int, group: int) -> None:
    """``EBUSY`` while it has members, ``ENOENT`` if it does not exist."""
    _call(fd, _QGROUP_CREATE, struct.pack("=QQ", 0, group))


def assign(fd: int, member: int, group: int, *, joined: bool = True) -> None:
    """Make ``member`` count in ``group`` (or no longer, ``joined=False``)."""
    _call(fd, _QGROUP_ASSIGN, struct.pack("=QQQ", int(joined), member, group))


def limit(fd: int, group: int, max_referenced: int | None) -> None:
    """Limit what ``group`` references (None: no limit)."""
    value = _U64_MAX if max_referenced is None else max_referenced
    _call(fd, _QGROUP_LIMIT, struct.pack("=6Q", group, _LIMIT_MAX_RFER, value, 0, 0, 0))


def sync(fd: int) -> None:
    """Write every dirty file back and commit (``btrfs filesystem sync``): what a rescan must
    come after to count data still in memory. Costly on a busy filesystem: for rare events."""
    fcntl.ioctl(fd, _SYNC)


def commit(fd: int) -> None:
    """Commit the running transaction and wait for it, without writing dirty file data back
    (what ``syncfs`` would add): qgroup figures count freed extents only at a commit."""
    transaction = _call(fd, _START_SYNC, bytes(8))
    _call(fd, _WAIT_SYNC, transaction)
