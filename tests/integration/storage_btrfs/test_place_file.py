"""A finished upload placed from its upload area (one subvolume) into its folder (another),
where a rename cannot cross: cloned in, under the folder's quota, symlinks never followed."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from schemas.folder_paths import parse_path
from services.storage.folderfs import FolderFsError, open_root, place_file
from services.storage.volumes import BtrfsVolume
from tests.integration.storage_btrfs.support import MiB, fill


@contextmanager
def _opened(area: Path, root: Path) -> Iterator[tuple[int, int]]:
    area_fd = os.open(area, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with open_root(root) as root_fd:
            yield area_fd, root_fd
    finally:
        os.close(area_fd)


def _hidden(directory: Path) -> list[str]:
    return [name for name in os.listdir(directory) if name.startswith(".jetyard-")]


def test_a_part_is_cloned_into_place_and_costs_the_quota_nothing_more(
    volume: BtrfsVolume, folder: str
) -> None:
    area, root = volume.upload_area(folder), volume.folder_root(folder)
    data = os.urandom(5 * MiB)
    (area / "u.part").write_bytes(data)
    os.chmod(area / "u.part", 0o600)
    before = volume.quota_used(folder)
    with _opened(area, root) as (area_fd, root_fd):
        assert place_file(area_fd, "u.part", root_fd, parse_path("in/new/data.bin")) is None
    placed = root / "in" / "new" / "data.bin"
    assert placed.read_bytes() == data
    assert (placed.stat().st_mode & 0o777) == 0o600
    assert not (area / "u.part").exists()
    assert _hidden(placed.parent) == []
    assert volume.quota_used(folder) - before < 256 * 1024  # the extents are shared, not new


def test_an_existing_file_is_replaced_and_its_stat_returned(
    volume: BtrfsVolume, folder: str
) -> None:
    area, root = volume.upload_area(folder), volume.folder_root(folder)
    (root / "data.bin").write_bytes(b"old")
    (area / "u.part").write_bytes(b"new")
    with _opened(area, root) as (area_fd, root_fd):
        old = place_file(area_fd, "u.part", root_fd, parse_path("data.bin"))
    assert old is not None and old.st_size == 3
    assert (root / "data.bin").read_bytes() == b"new"


def test_a_full_folder_refuses_the_clone_and_keeps_the_part(
    volume: BtrfsVolume, folder: str
) -> None:
    area, root = volume.upload_area(folder), volume.folder_root(folder)
    volume.set_quota(folder, 6 * MiB)
    fill(area / "u.part", 3 * MiB)
    fill(root / "session.bin", 6 * MiB)  # a session takes the rest
    with (
        _opened(area, root) as (area_fd, root_fd),
        pytest.raises(OSError, match="quota exceeded") as refused,
    ):
        place_file(area_fd, "u.part", root_fd, parse_path("data.bin"))
    assert refused.value.errno == errno.EDQUOT
    assert sorted(os.listdir(root)) == ["session.bin"]  # no clone, no hidden temp file
    assert (area / "u.part").stat().st_size == 3 * MiB
    assert volume.quota_used(folder) <= 6 * MiB


def test_a_symlinked_parent_is_refused_before_anything_is_cloned(
    volume: BtrfsVolume, folder: str, tmp_path: Path
) -> None:
    area, root = volume.upload_area(folder), volume.folder_root(folder)
    (root / "out").symlink_to(tmp_path)
    (area / "u.part").write_bytes(b"x")
    with _opened(area, root) as (area_fd, root_fd), pytest.raises(FolderFsError) as refused:
        place_file(area_fd, "u.part", root_fd, parse_path("out/data.bin"))
    assert refused.value.code == "symlink_refused"
    assert os.listdir(tmp_path) == []


def test_across_filesystems_the_rename_error_stands(
    volume: BtrfsVolume, folder: str, tmp_path: Path
) -> None:
    (tmp_path / "u.part").write_bytes(b"x")  # the test's temp directory: not this btrfs
    root = volume.folder_root(folder)
    with (
        _opened(tmp_path, root) as (area_fd, root_fd),
        pytest.raises(OSError, match="cross-device") as refused,
    ):
        place_file(area_fd, "u.part", root_fd, parse_path("data.bin"))
    assert refused.value.errno == errno.EXDEV
    assert os.listdir(root) == []
    assert (tmp_path / "u.part").exists()
