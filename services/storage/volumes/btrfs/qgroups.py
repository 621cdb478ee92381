"""What btrfs says of its qgroups in sysfs (``/sys/fs/btrfs/<fsid>/qgroups``): figures and
limits as the kernel holds them now, read with no subprocess and no privilege.

``referenced`` counts the extents a qgroup's subvolumes reach (file data and the subvolume's
own tree blocks, an extent shared between them once) as of the last transaction commit;
what was written since is held as reservations until the commit accounts it, and freed
extents leave ``referenced`` only at that commit. The kernel refuses a write when
``referenced`` and every reservation and the write together pass the limit: ``charged``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.storage.volumes.btrfs.ioctls import qgroup_name

SYSFS = Path("/sys/fs/btrfs")
_LIMIT_MAX_RFER = 1  # limit_flags bit: max_referenced is set


@dataclass(frozen=True)
class Figures:
    referenced: int
    reserved_data: int
    """File data written since the last commit (its extents are in no ``referenced`` yet)."""
    reserved_meta: int
    limit: int | None

    @property
    def held(self) -> int:
        """The data and tree blocks the qgroup holds now, committed or not."""
        return self.referenced + self.reserved_data

    @property
    def charged(self) -> int:
        """What the kernel weighs against the limit now (``btrfs`` ``qgroup_check_limits``)."""
        return self.referenced + self.reserved_data + self.reserved_meta


class Qgroups:
    def __init__(self, fsid: str, sysfs: Path = SYSFS) -> None:
        self.fsid = fsid
        self.directory = sysfs / fsid / "qgroups"

    @property
    def enabled(self) -> bool:
        """Whether quotas are on (the kernel shows the directory only then)."""
        return self.directory.is_dir()

    @property
    def mode(self) -> str:
        """``qgroup`` (full accounting) or ``squota`` (simple quotas, Linux 6.7 and later)."""
        try:
            return (self.directory / "mode").read_text().strip()
        except FileNotFoundError:  # kernels before simple quotas know only full accounting
            return "qgroup"

    @property
    def inconsistent(self) -> bool:
        """Whether the figures are known wrong until a rescan (``ioctls.start_rescan``)."""
        return (self.directory / "inconsistent").read_text().strip() == "1"

    def exists(self, group: int) -> bool:
        return (self.directory / qgroup_name(group)).is_dir()

    def figures(self, group: int) -> Figures:
        """``FileNotFoundError`` if ``group`` does not exist."""
        here = self.directory / qgroup_name(group)

        def number(name: str) -> int:
            return int((here / name).read_text())

        limited = number("limit_flags") & _LIMIT_MAX_RFER
        return Figures(
            referenced=number("referenced"),
            reserved_data=number("rsv_data"),
            reserved_meta=number("rsv_meta_pertrans") + number("rsv_meta_prealloc"),
            limit=number("max_referenced") if limited else None,
        )
