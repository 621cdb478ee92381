"""The start-up check of a btrfs volume's root: on btrfs, quotas on (turned on here if they
are off), full qgroup accounting, the privilege to manage qgroups, figures consistent (else
a rescan). Each refusal is a sentence naming the volume and its root."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from services.storage.volumes.btrfs import ioctls
from services.storage.volumes.btrfs.qgroups import Qgroups
from services.storage.volumes.btrfs.subvolumes import DIR_FLAGS, BtrfsVolumeUnusable

log = logging.getLogger(__name__)


def check_root(name: str, root: Path) -> Qgroups:
    """The qgroups of ``root``'s filesystem, once the root is fit for volume ``name``."""
    try:
        fd = os.open(root, DIR_FLAGS)
    except OSError as error:
        raise BtrfsVolumeUnusable(
            f"volume {name!r}: cannot open root {str(root)!r}: {error}"
        ) from None
    try:
        qgroups = Qgroups(_fsid(name, root, fd))
        if not qgroups.directory.parent.is_dir():
            raise BtrfsVolumeUnusable(
                f"volume {name!r}: {qgroups.directory.parent} is missing: mount sysfs "
                "(the service reads qgroup figures there)"
            )
        if not qgroups.enabled:
            _enable(name, root, fd)
        if qgroups.mode != "qgroup":
            raise BtrfsVolumeUnusable(
                f"volume {name!r}: the btrfs holding {str(root)!r} has {qgroups.mode} "
                "quotas; the btrfs backend needs full qgroup accounting ('btrfs quota "
                "disable', then let the service turn quotas on)"
            )
        try:
            ioctls.qgroup_relations(fd, ioctls.qgroup_id(1, 0))  # needs CAP_SYS_ADMIN too
        except PermissionError:
            raise BtrfsVolumeUnusable(
                f"volume {name!r}: managing btrfs qgroups at {str(root)!r} needs "
                "CAP_SYS_ADMIN: run the storage service as root"
            ) from None
        if qgroups.inconsistent and ioctls.start_rescan(fd):
            log.warning(
                "storage: volume %s: btrfs quota figures were inconsistent: rescanning", name
            )
        return qgroups
    finally:
        os.close(fd)


def _fsid(name: str, root: Path, fd: int) -> str:
    try:
        return ioctls.fsid(fd)
    except OSError as error:
        if error.errno not in (errno.ENOTTY, errno.EINVAL, errno.EOPNOTSUPP):
            raise
    raise BtrfsVolumeUnusable(
        f"volume {name!r}: root {str(root)!r} is not on a btrfs filesystem; the btrfs "
        "backend needs one (or use the local backend)"
    )


def _enable(name: str, root: Path, fd: int) -> None:
    """Turn quotas on; the kernel then counts what the filesystem holds in the background."""
    try:
        ioctls.enable_quota(fd)
    except OSError as error:
        raise BtrfsVolumeUnusable(
            f"volume {name!r}: quotas are off on the btrfs holding {str(root)!r} and could not "
            f"be turned on ({error.strerror}): run the service as root, or run 'btrfs quota "
            f"enable {root}' once"
        ) from None
    log.info("storage: volume %s: turned btrfs quotas on at %s", name, root)
