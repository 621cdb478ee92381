"""A folder on a btrfs volume end to end: ``jetyard up`` with an operator's btrfs volume as the
default (``JETYARD_STORAGE_VOLUMES``), a folder with a 10 MiB quota made with the CLI, a batch
session in Docker writing 60 MiB into it through its mount: the kernel stops the write with
"Disk quota exceeded", the folder holds no more than its quota, and the data plane refuses an
upload into the same folder the same way. Needs root, loop devices and btrfs (CI has them)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from jetyard.runtime.natsserver import free_port
from services.storage.volumes import BtrfsVolume
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.test_vfolders import admin_of
from tests.integration.storage_btrfs.support import loop_btrfs

MiB = 1024 * 1024
QUOTA = 10 * MiB


@pytest.fixture
def btrfs_stack(tmp_path: Path) -> Iterator[tuple[Jetyard, Path]]:
    (tmp_path / "disk").mkdir()
    with loop_btrfs(tmp_path / "disk") as mounted:
        root = mounted / "jetyard"
        root.mkdir()
        volumes = {"fast": {"backend": "btrfs", "root": str(root)}}
        env = {
            "JETYARD_STORAGE_VOLUMES": json.dumps(volumes),
            "JETYARD_STORAGE_DEFAULT_VOLUME": "fast",
        }
        stack = Jetyard(tmp_path / "data", free_port(), "docker", env=env).start()
        try:
            yield stack, root
        finally:
            stack.stop()


def test_a_session_writing_past_its_folders_quota_is_stopped_by_the_kernel(
    btrfs_stack: tuple[Jetyard, Path], tmp_path: Path
) -> None:
    stack, root = btrfs_stack
    me = admin_of(stack)
    me.ok("create", "limited", "--quota", "10m")
    info = json.loads(me.ok("info", "limited", "--json"))
    assert (info["volume"], info["quotaBytes"]) == ("fast", QUOTA), info
    folder_id = me.folder_id("limited")

    command = "dd if=/dev/zero of=/home/work/limited/big.bin bs=1M count=60; echo dd-exit=$?; sync"
    ended = me.finished(me.start_session(command, [{"folder": "limited"}], type="batch"))
    assert ended["session"]["status"] == "TERMINATED", ended
    logs = ended["sessionLogs"]
    assert "Disk quota exceeded" in logs and "dd-exit=1" in logs, logs

    volume = BtrfsVolume("fast", root, "e2e-reader")
    written = (volume.folder_root(folder_id) / "big.bin").stat().st_size
    assert 0 < written <= QUOTA
    assert volume.quota_used(folder_id) <= QUOTA
    # Measured when the session ended: what the API says the folder holds is within it too.
    wait_until(
        lambda: 0 < json.loads(me.ok("info", "limited", "--json"))["bytesUsed"] <= QUOTA,
        "the folder's usage measured after the session",
    )

    # The data plane on the same folder: refused, and nothing lands.
    (tmp_path / "more.bin").write_bytes(os.urandom(MiB))
    refused = me.cli("upload", "limited", str(tmp_path / "more.bin"), "-q")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    assert "quota" in refused.stderr, refused.stderr
    assert "more.bin" not in me.ok("files", "limited")
    assert volume.quota_used(folder_id) <= QUOTA
