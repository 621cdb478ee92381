"""The btrfs backend on a real loop-mounted btrfs: start-up checks, folders as two subvolumes
under one qgroup, the hard limit a session meets, usage as the filesystem accounts it."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

from services.storage.foldertree import Usage
from services.storage.volumes import BtrfsVolume, Capability, FolderNotFound, folder_relpath
from services.storage.volumes.btrfs import ioctls
from tests.integration.storage_btrfs.conftest import HOST
from tests.integration.storage_btrfs.support import (
    MiB,
    fill,
    loop_btrfs,
    run_btrfs,
    wait_for_cleaner,
)


def _ids(volume: BtrfsVolume, folder_id: str) -> tuple[int, int]:
    """The ids of the folder's data subvolume and of its upload area's."""
    found = []
    for path in (volume.folder_root(folder_id), volume.upload_area(folder_id)):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert os.fstat(fd).st_ino == ioctls.FIRST_FREE_OBJECTID, f"{path} is no subvolume"
            found.append(ioctls.root_id(fd))
        finally:
            os.close(fd)
    return found[0], found[1]


def _members(volume: BtrfsVolume, data_id: int) -> set[int]:
    fd = os.open(volume.root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return set(ioctls.qgroup_relations(fd, ioctls.qgroup_id(1, data_id)))
    finally:
        os.close(fd)


def _write_until_refused(path: Path, size: int) -> None:
    """Write as a program in a session does (buffered, flushed every MiB), errors raised."""
    with open(path, "wb") as file:
        for _ in range(size // MiB):
            file.write(os.urandom(MiB))
            file.flush()


# -- start-up -------------------------------------------------------------------------


def test_quotas_that_are_off_are_turned_on_at_start_up(tmp_path: Path) -> None:
    with loop_btrfs(tmp_path, quotas=False) as mount:
        volume = BtrfsVolume("fast", mount, HOST)
        assert volume.qgroups.enabled
        folder = volume.create_folder("f-1")
        volume.set_quota("f-1", 2 * MiB)
        assert fill(folder / "x.bin", 4 * MiB) < 2 * MiB
        volume.remove_folder("f-1")


def _open_without_sys_admin(root: Path) -> str:
    """What opening a volume on ``root`` says in a root process lacking CAP_SYS_ADMIN."""
    code = (
        "import sys; from pathlib import Path; "
        "from services.storage.volumes import BtrfsVolume; "
        "BtrfsVolume('fast', Path(sys.argv[1]), 'h')"
    )
    command = ["setpriv", "--bounding-set=-sys_admin", sys.executable, "-c", code, str(root)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stdout
    return done.stderr.strip().splitlines()[-1]


def test_without_the_privilege_to_manage_quotas_start_up_says_what_to_do(
    tmp_path: Path,
) -> None:
    with loop_btrfs(tmp_path, quotas=False) as mount:
        said = _open_without_sys_admin(mount)
        assert f"quotas are off on the btrfs holding '{mount}' and could not be turned on" in said
        assert "run the service as root" in said
        run_btrfs("quota", "enable", mount)
        said = _open_without_sys_admin(mount)
        assert f"managing btrfs qgroups at '{mount}' needs CAP_SYS_ADMIN" in said


def test_a_plain_directory_where_a_folder_should_be_is_named(volume: BtrfsVolume) -> None:
    plain = volume.root / folder_relpath("f-plain")
    plain.mkdir(parents=True)
    with pytest.raises(RuntimeError, match="plain directory, not a subvolume"):
        volume.create_folder("f-plain")
    volume.remove_folder("f-plain")  # a tree put there by hand goes as tree backends remove one
    assert not plain.exists()


# -- folders --------------------------------------------------------------------------


def test_a_folder_is_two_subvolumes_in_one_qgroup_made_idempotently(
    volume: BtrfsVolume, folder: str
) -> None:
    assert volume.capabilities == {Capability.QUOTA, Capability.FAST_SIZE}
    assert volume.parts_counted
    root = volume.create_folder(folder)  # again: nothing changes
    assert root == volume.folder_root(folder) == volume.root / folder_relpath(folder)
    data_id, area_id = _ids(volume, folder)
    assert _members(volume, data_id) == {ioctls.qgroup_id(0, data_id), ioctls.qgroup_id(0, area_id)}
    assert volume.upload_area(folder) in set(volume.upload_areas())
    assert not volume.upload_area(folder).is_relative_to(root)
    assert volume.host_path(folder, HOST) == PurePosixPath(root)
    assert volume.host_path(folder, "another-host") is None
    volume.quota_used(folder)  # commits: the new subvolumes are accounted
    assert not volume.qgroups.inconsistent  # assigning empty subvolumes keeps figures exact


def test_quota_is_set_read_and_cleared(volume: BtrfsVolume, folder: str) -> None:
    assert volume.quota(folder) is None
    volume.set_quota(folder, 5 * MiB + 123)
    assert volume.quota(folder) == 5 * MiB + 123
    volume.set_quota(folder, None)
    assert volume.quota(folder) is None
    assert fill(volume.folder_root(folder) / "free.bin", 12 * MiB) == 12 * MiB


def test_a_missing_folder_is_not_found(volume: BtrfsVolume) -> None:
    for read in (volume.folder_root, volume.usage, volume.quota_used, volume.quota):
        with pytest.raises(FolderNotFound):
            read("f-missing")
    with pytest.raises(FolderNotFound):
        volume.set_quota("f-missing", MiB)
    volume.remove_folder("f-missing")  # nothing to do: fine


def test_removing_a_folder_takes_its_subvolumes_qgroup_and_everything_planted_in_it(
    volume: BtrfsVolume, mount: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    root = volume.create_folder("f-planted")
    data_id, area_id = _ids(volume, "f-planted")
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "deep.txt").write_text("deep")
    (root / "a" / "escape").symlink_to(outside)
    (root / "link-to-secret").symlink_to(outside / "secret.txt")
    parent = os.open(root / "a", os.O_RDONLY | os.O_DIRECTORY)
    try:
        ioctls.create_subvolume(parent, "made-by-a-session")  # needs no privilege
    finally:
        os.close(parent)
    (root / "a" / "made-by-a-session" / "inner.txt").write_text("inner")
    (volume.upload_area("f-planted") / "x.part").write_bytes(b"part")

    volume.remove_folder("f-planted")
    volume.remove_folder("f-planted")  # idempotent

    assert not os.path.lexists(root)
    assert not os.path.lexists(volume.upload_area("f-planted"))
    assert (outside / "secret.txt").read_text() == "secret"
    assert not volume.qgroups.exists(ioctls.qgroup_id(1, data_id))
    wait_for_cleaner(mount)
    for gone in (data_id, area_id):
        assert not volume.qgroups.exists(ioctls.qgroup_id(0, gone))  # the kernel drops them


# -- the hard limit ---------------------------------------------------------------------


def test_a_session_writing_past_the_quota_gets_edquot(volume: BtrfsVolume, folder: str) -> None:
    quota = 8 * MiB
    volume.set_quota(folder, quota)
    path = volume.folder_root(folder) / "big.bin"
    with pytest.raises(OSError, match="quota exceeded") as refused:
        _write_until_refused(path, 16 * MiB)
    assert refused.value.errno == errno.EDQUOT
    used = volume.quota_used(folder)
    assert 6 * MiB < used <= quota
    assert 6 * MiB < volume.usage(folder).bytes <= used


def test_upload_parts_count_against_the_quota_as_they_arrive(
    volume: BtrfsVolume, folder: str
) -> None:
    volume.set_quota(folder, 10 * MiB)
    part = fill(volume.upload_area(folder) / f"{'a' * 32}.part", 7 * MiB)
    assert part == 7 * MiB
    assert volume.quota_used(folder) >= 7 * MiB
    assert volume.usage(folder).bytes < MiB  # parts are not in the folder's usage
    assert fill(volume.folder_root(folder) / "session.bin", 6 * MiB) < 3 * MiB
    assert volume.quota_used(folder) <= 10 * MiB


def test_a_subvolume_made_inside_a_folder_is_brought_under_its_quota(
    volume: BtrfsVolume, folder: str
) -> None:
    root = volume.folder_root(folder)
    volume.set_quota(folder, 8 * MiB)
    parent = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ioctls.create_subvolume(parent, "escape")
    finally:
        os.close(parent)
    assert fill(root / "escape" / "a.bin", 6 * MiB) == 6 * MiB  # not yet in 1/D
    assert volume.quota_used(folder) >= 6 * MiB  # found and added
    assert volume.usage(folder).bytes >= 6 * MiB
    assert fill(root / "b.bin", 6 * MiB) < 3 * MiB
    assert fill(root / "escape" / "c.bin", 6 * MiB) < 3 * MiB
    assert not volume.qgroups.inconsistent


def test_a_snapshot_a_session_takes_of_its_folder_counts_once_rescanned(
    volume: BtrfsVolume, folder: str, mount: Path
) -> None:
    root = volume.folder_root(folder)
    volume.set_quota(folder, 20 * MiB)
    assert fill(root / "a.bin", 6 * MiB) == 6 * MiB
    run_btrfs("subvolume", "snapshot", root, root / "snap")  # shares a.bin's extents
    assert fill(root / "snap" / "b.bin", 3 * MiB) == 3 * MiB
    volume.quota_used(folder)  # found, added; the figures are rescanned
    run_btrfs("quota", "rescan", "--wait", mount)
    assert not volume.qgroups.inconsistent
    used = volume.quota_used(folder)
    assert 9 * MiB <= used < 10 * MiB  # a.bin once, b.bin, the trees
    assert fill(root / "c.bin", 20 * MiB) < 11 * MiB


# -- usage --------------------------------------------------------------------------------


def test_usage_counts_a_hard_linked_file_once(volume: BtrfsVolume, folder: str) -> None:
    root = volume.folder_root(folder)
    empty = volume.usage(folder)
    assert empty.files == 0
    (root / "data.bin").write_bytes(os.urandom(3 * MiB))
    os.link(root / "data.bin", root / "again.bin")
    counted = volume.recount(folder)
    assert counted.files == 2  # two names
    assert 3 * MiB <= counted.bytes - empty.bytes < 3 * MiB + 256 * 1024
    assert volume.usage(folder) == counted


def test_freed_bytes_show_at_once(volume: BtrfsVolume, folder: str) -> None:
    """Qgroups account a free only at a transaction commit (30 s apart by default): usage
    and quota_used commit first, so a delete shows in the next reading."""
    root = volume.folder_root(folder)
    volume.set_quota(folder, 10 * MiB)
    fill(root / "data.bin", 8 * MiB)
    assert volume.usage(folder).bytes >= 8 * MiB  # written, not yet committed: shown too
    assert fill(root / "more.bin", 4 * MiB) < 4 * MiB
    (root / "data.bin").unlink()
    (root / "more.bin").unlink()
    assert volume.usage(folder).bytes < MiB
    assert volume.quota_used(folder) < MiB
    assert fill(root / "after.bin", 8 * MiB) == 8 * MiB


def test_kept_counts_move_with_recorded_changes_and_a_recount_walks(
    volume: BtrfsVolume, folder: str
) -> None:
    root = volume.folder_root(folder)
    assert volume.usage(folder).files == 0  # walked once
    (root / "one.txt").write_text("1")
    (root / "two.txt").write_text("2")
    volume.record_change(folder, Usage(bytes=2, files=2))
    assert volume.usage(folder).files == 2
    (root / "session.txt").write_text("a session wrote this through its mount")
    assert volume.usage(folder).files == 2  # unseen until a recount
    assert volume.recount(folder).files == 3
    volume.record_change(folder, Usage(bytes=-1, files=-5))
    assert volume.usage(folder).files == 0  # never below zero
    volume.meta.update(folder, lambda meta: meta.model_copy(update={"files": 9, "count_rules": 1}))
    assert volume.usage(folder).files == 3  # kept under older rules: walked again
