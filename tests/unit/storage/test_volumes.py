"""Volume backends on real directories: layout, capabilities, usage, quota, mounts."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest

from schemas.ids import InvalidTokenError
from services.storage.foldertree import Usage
from services.storage.settings import StorageSettings
from services.storage.volumes import (
    Capability,
    FolderNotFound,
    LocalVolume,
    SharedVolume,
    Volume,
    folder_relpath,
    open_volumes,
)

KEY = "k" * 32


def test_folders_spread_over_two_levels_of_hex_buckets() -> None:
    path = folder_relpath("6f1c2e0a-1111-4d0e-9d3a-4a8f1b0c7e21")
    first, second, leaf = path.parts
    assert len(first) == len(second) == 2
    assert int(first, 16) >= 0 and int(second, 16) >= 0
    assert leaf == "6f1c2e0a-1111-4d0e-9d3a-4a8f1b0c7e21"
    assert folder_relpath("a") == folder_relpath("a")  # stable
    buckets = {folder_relpath(f"folder-{n}").parts[0] for n in range(2000)}
    assert len(buckets) > 200  # ids alike in their prefix still spread


@pytest.mark.parametrize("folder_id", ["", "../x", "a/b", "a" * 65, "x.json"])
def test_a_folder_id_must_be_an_id_token(folder_id: str) -> None:
    with pytest.raises(InvalidTokenError):
        folder_relpath(folder_id)


def test_capabilities_are_declared_honestly(tmp_path: Path) -> None:
    local = LocalVolume("local", tmp_path / "l", "host-a")
    shared = SharedVolume("shared", {"*": tmp_path / "s"}, "host-a")
    assert local.capabilities == frozenset()
    assert shared.capabilities == {Capability.FAST_SIZE}


def _volumes(tmp_path: Path) -> list[Volume]:
    return [
        LocalVolume("local", tmp_path / "local", "host-a"),
        SharedVolume("shared", {"host-a": tmp_path / "shared"}, "host-a"),
    ]


@pytest.mark.parametrize("index", [0, 1], ids=["local", "shared"])
def test_a_folder_is_created_found_measured_limited_and_removed(tmp_path: Path, index: int) -> None:
    volume = _volumes(tmp_path)[index]
    with pytest.raises(FolderNotFound):
        volume.folder_root("f-1")
    root = volume.create_folder("f-1")
    assert volume.create_folder("f-1") == root  # idempotent
    assert volume.folder_root("f-1") == root
    assert root.relative_to(tmp_path).parts[1:] == folder_relpath("f-1").parts
    (root / "d").mkdir()
    (root / "d" / "x.bin").write_bytes(b"x" * 100)
    assert volume.usage("f-1") == Usage(100, 1)
    assert volume.quota("f-1") is None
    volume.set_quota("f-1", 1000)
    assert volume.quota("f-1") == 1000
    assert volume.upload_area("f-1").is_dir()
    assert not volume.upload_area("f-1").is_relative_to(root)
    volume.remove_folder("f-1")
    volume.remove_folder("f-1")  # idempotent
    assert not root.exists()
    assert volume.quota("f-1") is None
    with pytest.raises(FolderNotFound):
        volume.set_quota("f-1", 5)


def test_removing_a_folder_never_follows_a_symlink_planted_in_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    volume = LocalVolume("local", tmp_path / "local", "host-a")
    root = volume.create_folder("f-1")
    (root / "link").symlink_to(outside)
    volume.remove_folder("f-1")
    assert (outside / "keep.txt").read_text() == "keep"


def test_local_usage_is_walked_every_time(tmp_path: Path) -> None:
    volume = LocalVolume("local", tmp_path / "local", "host-a")
    root = volume.create_folder("f-1")
    (root / "a").write_bytes(b"a" * 10)
    assert volume.usage("f-1") == Usage(10, 1)
    (root / "b").write_bytes(b"b" * 5)  # a session writing through its mount
    volume.record_change("f-1", Usage(999, 9))  # nothing kept
    assert volume.usage("f-1") == Usage(15, 2)


def test_shared_usage_is_kept_moved_by_changes_and_recounted(tmp_path: Path) -> None:
    volume = SharedVolume("shared", {"*": tmp_path / "shared"}, "host-a")
    root = volume.create_folder("f-1")
    (root / "a").write_bytes(b"a" * 10)
    assert volume.usage("f-1") == Usage(10, 1)  # the first read walks
    (root / "b").write_bytes(b"b" * 5)  # a session writing: not seen until a recount
    assert volume.usage("f-1") == Usage(10, 1)
    volume.record_change("f-1", Usage(7, 1))
    assert volume.usage("f-1") == Usage(17, 2)
    volume.record_change("f-1", Usage(-100, -10))
    assert volume.usage("f-1") == Usage(0, 0)
    assert volume.recount("f-1") == Usage(15, 2)
    assert volume.usage("f-1") == Usage(15, 2)


def test_each_host_sees_a_shared_folder_at_its_own_mount(tmp_path: Path) -> None:
    mounts = {"host-a": tmp_path / "a", "host-b": Path("/mnt/b"), "*": Path("/net/nfs")}
    volume = SharedVolume("shared", mounts, "host-a")
    relative = folder_relpath("f-1")
    assert volume.host_path("f-1", "host-a") == PurePosixPath(tmp_path / "a", relative)
    assert volume.host_path("f-1", "host-b") == PurePosixPath("/mnt/b", relative)
    assert volume.host_path("f-1", "host-c") == PurePosixPath("/net/nfs", relative)
    with pytest.raises(ValueError, match="no mount for host"):
        SharedVolume("shared", {"host-b": Path("/mnt/b")}, "host-a")


def test_only_its_own_host_can_mount_a_local_folder(tmp_path: Path) -> None:
    volume = LocalVolume("local", tmp_path / "l", "host-a")
    assert volume.host_path("f-1", "host-a") == PurePosixPath(tmp_path / "l", folder_relpath("f-1"))
    assert volume.host_path("f-1", "host-b") is None


def test_volumes_are_configured_by_name_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JETYARD_STORAGE_TOKEN_KEY", KEY)
    monkeypatch.setenv("JETYARD_STORAGE_HOSTNAME", "host-a")
    monkeypatch.setenv(
        "JETYARD_STORAGE_VOLUMES",
        f'{{"fast": {{"backend": "local", "root": "{tmp_path / "f"}"}},'
        f' "nfs": {{"backend": "shared", "mounts": {{"host-a": "{tmp_path / "n"}"}}}}}}',
    )
    settings = StorageSettings()
    assert settings.default_volume == "fast"  # no "local": the first by name
    volumes = open_volumes(settings)
    assert isinstance(volumes["fast"], LocalVolume)
    assert isinstance(volumes["nfs"], SharedVolume)
    assert (tmp_path / "f" / ".jetyard" / "uploads").is_dir()
    assert os.path.isdir(tmp_path / "n" / ".jetyard" / "meta")


@pytest.mark.parametrize(
    "changes",
    [
        {"token_key": "short"},
        {"volumes": {"bad name": {"backend": "local", "root": "/x"}}},
        {"volumes": {"v": {"backend": "zfs", "root": "/x"}}},
        {"volumes": {"v": {"backend": "shared", "mounts": {}}}},
        {"volumes": {"v": {"backend": "local", "root": "/x"}}, "default_volume": "w"},
    ],
)
def test_bad_settings_are_refused_at_start(changes: dict[str, object]) -> None:
    values: dict[str, object] = {"token_key": KEY, **changes}
    with pytest.raises(ValueError):  # noqa: PT011 - pydantic's and ours
        StorageSettings.model_validate(values)
