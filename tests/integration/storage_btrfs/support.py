"""Helpers of the btrfs backend tests: a loop-mounted btrfs made and torn down, a data plane
serving a btrfs volume, and what a session does through its mount (writes until refused)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from services.storage.volumes import BtrfsVolume
from tests.integration.storage_support import HOSTNAME, StorageServer

MiB = 1024 * 1024
IMAGE_MIB = 300  # sparse: only what the tests write takes disk space


def _run(*command: str | Path) -> str:
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command))} failed: {done.stderr.strip()}")
    return done.stdout.strip()


@contextlib.contextmanager
def loop_btrfs(directory: Path, *, quotas: bool = True) -> Iterator[Path]:
    """A fresh btrfs in a sparse image under ``directory``, mounted through its own loop
    device (quotas on if ``quotas``); unmounted, detached and deleted afterwards, whatever
    happened inside."""
    if shutil.which("mkfs.btrfs") is None:
        raise RuntimeError("mkfs.btrfs is missing: run scripts/ensure-btrfs (btrfs-progs)")
    image, mount = directory / "btrfs.img", directory / "mnt"
    with open(image, "wb") as sparse:
        sparse.truncate(IMAGE_MIB * MiB)
    try:
        _run("mkfs.btrfs", "-q", "-f", image)
        device = _run("losetup", "--find", "--show", image)
        try:
            mount.mkdir()
            _run("mount", device, mount)
            try:
                if quotas:
                    _run("btrfs", "quota", "enable", mount)
                yield mount
            finally:
                _unmount(mount)
        finally:
            _run("losetup", "-d", device)
    finally:
        image.unlink()


def _unmount(mount: Path) -> None:
    """Unmount; if something still holds the filesystem (a descriptor a test leaked), detach
    it lazily so the loop device is still freed, and say so."""
    try:
        _run("umount", mount)
    except RuntimeError:
        _run("umount", "--lazy", mount)
        raise


def run_btrfs(*arguments: str | Path) -> str:
    """A ``btrfs`` command (btrfs-progs), as an operator or a session would run it."""
    return _run("btrfs", *arguments)


def wait_for_cleaner(mount: Path) -> None:
    """Until the kernel has dropped every deleted subvolume (and their qgroups with them).
    The filesystem sync wakes the cleaner, which would otherwise wait for the next periodic
    commit (30 s)."""
    _run("btrfs", "filesystem", "sync", mount)
    _run("btrfs", "subvolume", "sync", mount)


def fill(path: Path, limit: int, block: int = MiB) -> int:
    """Write ``path`` ``block`` by ``block`` as a session would, until ``limit`` bytes or the
    quota refuses (``EDQUOT``; any other error is raised); how many bytes it holds."""
    data = memoryview(os.urandom(block))
    written = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    except OSError as error:
        if error.errno != errno.EDQUOT:
            raise
        return 0  # a full folder has no room for a new name either
    try:
        while written < limit:
            written += os.write(fd, data[: min(block, limit - written)])
    except OSError as error:
        if error.errno != errno.EDQUOT:
            raise
    finally:
        os.close(fd)
    return written


class BtrfsServer(StorageServer):
    """A data-plane process whose ``local`` volume is the btrfs backend at ``volume_root``."""

    def __init__(self, root: Path, volume_root: Path, **settings: Any) -> None:
        super().__init__(root, **settings)
        self.volume_root = volume_root

    def volumes(self) -> dict[str, Any]:
        return {"local": {"backend": "btrfs", "root": str(self.volume_root)}}

    def btrfs(self) -> BtrfsVolume:
        """The volume, as this test process sees the same directory."""
        return BtrfsVolume("local", self.volume_root, HOSTNAME)
