"""The btrfs backend: folders as subvolumes whose quotas the kernel enforces (``volume``),
over the kernel's ioctls (``ioctls``), the qgroup figures in sysfs (``qgroups``), subvolumes
as paths (``subvolumes``) and the check of a volume's root at start-up (``startup``)."""

from __future__ import annotations

from services.storage.volumes.btrfs.subvolumes import BtrfsVolumeError
from services.storage.volumes.btrfs.volume import BtrfsVolume

__all__ = ["BtrfsVolume", "BtrfsVolumeError"]
