"""The btrfs backend tests' fixtures: one loop-mounted btrfs (quotas on) for the package, and
per test a volume of its own on it and a fresh folder there, removed afterwards."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from schemas.ids import new_id
from services.storage.volumes import BtrfsVolume
from tests.integration.storage_btrfs.support import loop_btrfs

HOST = "btrfs-test-host"


@pytest.fixture(scope="package")
def mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with loop_btrfs(tmp_path_factory.mktemp("btrfs")) as mounted:
        yield mounted


@pytest.fixture
def volume(mount: Path) -> Iterator[BtrfsVolume]:
    """A volume in a directory of its own on the package's btrfs."""
    root = mount / f"volume-{new_id()[:8]}"
    root.mkdir()
    yield BtrfsVolume("fast", root, HOST)
    shutil.rmtree(root)


@pytest.fixture
def folder(volume: BtrfsVolume) -> Iterator[str]:
    folder_id = f"f-{new_id()[:12]}"
    volume.create_folder(folder_id)
    yield folder_id
    volume.remove_folder(folder_id)
