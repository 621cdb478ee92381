"""The btrfs backend's pure parts: its settings, the kernel's numbers (ioctl requests, qgroup
ids), the qgroup figures as sysfs shows them, and the refusal of a root that is not btrfs.
The backend itself runs on a real btrfs in ``tests/integration/storage_btrfs/``."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from services.storage.settings import BtrfsVolumeSettings, StorageSettings, VolumeSettings
from services.storage.volumes import BtrfsVolume, BtrfsVolumeError, open_volumes
from services.storage.volumes.btrfs import ioctls
from services.storage.volumes.btrfs.qgroups import Figures, Qgroups

KEY = "k" * 32


def test_a_btrfs_volume_is_configured_by_its_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JETYARD_STORAGE_TOKEN_KEY", KEY)
    monkeypatch.setenv(
        "JETYARD_STORAGE_VOLUMES", json.dumps({"fast": {"backend": "btrfs", "root": "/srv/b"}})
    )
    settings = StorageSettings()
    assert settings.volumes == {"fast": BtrfsVolumeSettings(backend="btrfs", root=Path("/srv/b"))}
    assert settings.default_volume == "fast"


@pytest.mark.parametrize(
    "config",
    [
        {"backend": "btrfs"},
        {"backend": "btrfs", "root": "/srv/b", "mounts": {"*": "/srv/b"}},
        {"backend": "btrfs", "root": "/srv/b", "quota": "hard"},
    ],
    ids=["no root", "mounts", "unknown field"],
)
def test_a_btrfs_volume_takes_a_root_and_nothing_else(config: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        TypeAdapter(VolumeSettings).validate_python(config)


def test_a_root_that_is_not_btrfs_is_refused_at_start_up_by_name() -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:  # tmpfs: never btrfs
        root = Path(shm)
        assert not _on_btrfs(root)
        config = BtrfsVolumeSettings(backend="btrfs", root=root)
        settings = StorageSettings(token_key=KEY, hostname="host-a", volumes={"fast": config})
        with pytest.raises(BtrfsVolumeError, match="is not on a btrfs filesystem") as refused:
            open_volumes(settings)
        assert str(root) in str(refused.value) and "'fast'" in str(refused.value)
        assert not (root / ".jetyard").exists()  # refused before anything was made
        # A restart cannot change it: `jetyard serve` exits STOPPED_FOR_GOOD, `up` waits.
        assert getattr(refused.value, "for_good", False) is True


def test_a_root_that_does_not_exist_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(BtrfsVolumeError, match="cannot open root") as refused:
        BtrfsVolume("fast", tmp_path / "missing", "host-a")
    assert str(tmp_path / "missing") in str(refused.value)


def _on_btrfs(path: Path) -> bool:
    """Whether ``path`` is on btrfs (the ioctl that only btrfs answers)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ioctls.fsid(fd)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def test_ioctl_requests_are_those_of_linux_btrfs_h() -> None:
    # From linux/btrfs.h, as the kernel's _IOR/_IOW/_IOWR macros compute them.
    assert ioctls._SYNC == 0x9408
    assert ioctls._SUBVOL_CREATE == 0x5000940E
    assert ioctls._TREE_SEARCH == 0xD0009411
    assert ioctls._INO_LOOKUP == 0xD0009412
    assert ioctls._WAIT_SYNC == 0x40089416
    assert ioctls._START_SYNC == 0x80089418
    assert ioctls._FS_INFO == 0x8400941F
    assert ioctls._QUOTA_CTL == 0xC0109428
    assert ioctls._QGROUP_ASSIGN == 0x40189429
    assert ioctls._QGROUP_CREATE == 0x4010942A
    assert ioctls._QGROUP_LIMIT == 0x8030942B
    assert ioctls._QUOTA_RESCAN == 0x4040942C
    assert ioctls._SNAP_DESTROY_V2 == 0x5000943F
    assert ioctls._SEARCH_KEY.size == 104 and ioctls._SEARCH_HEADER.size == 32


def test_qgroup_ids_carry_their_level_in_the_top_bits() -> None:
    assert ioctls.qgroup_id(0, 256) == 256
    assert ioctls.qgroup_id(1, 256) == (1 << 48) + 256
    assert ioctls.qgroup_name(ioctls.qgroup_id(1, 300)) == "1_300"
    assert ioctls.qgroup_name(ioctls.qgroup_id(0, 5)) == "0_5"


@pytest.mark.parametrize("name", ["", "a/b", "x" * 256])
def test_a_subvolume_is_named_by_one_name(name: str) -> None:
    with pytest.raises(ValueError, match="not a single name"):
        ioctls.create_subvolume(-1, name)


def _qgroup(directory: Path, name: str, **values: int) -> None:
    (directory / name).mkdir(parents=True)
    defaults = {
        "referenced": 0,
        "exclusive": 0,
        "rsv_data": 0,
        "rsv_meta_pertrans": 0,
        "rsv_meta_prealloc": 0,
        "limit_flags": 0,
        "max_referenced": 0,
    }
    for key, value in {**defaults, **values}.items():
        (directory / name / key).write_text(f"{value}\n")


def test_figures_are_read_as_the_kernel_shows_them(tmp_path: Path) -> None:
    qgroups = Qgroups("d4efe9cb", sysfs=tmp_path)
    assert not qgroups.enabled
    _qgroup(qgroups.directory, "1_256", referenced=1000, rsv_data=300, rsv_meta_pertrans=20,
            rsv_meta_prealloc=5, limit_flags=1, max_referenced=4096)  # fmt: skip
    _qgroup(qgroups.directory, "0_256", referenced=700, max_referenced=0)
    (qgroups.directory / "inconsistent").write_text("0\n")
    assert qgroups.enabled and not qgroups.inconsistent
    assert qgroups.mode == "qgroup"  # kernels without simple quotas have no mode file
    limited = qgroups.figures(ioctls.qgroup_id(1, 256))
    assert limited == Figures(referenced=1000, reserved_data=300, reserved_meta=25, limit=4096)
    assert limited.held == 1300 and limited.charged == 1325
    assert qgroups.figures(ioctls.qgroup_id(0, 256)).limit is None
    assert qgroups.exists(ioctls.qgroup_id(0, 256)) and not qgroups.exists(ioctls.qgroup_id(0, 257))
    with pytest.raises(FileNotFoundError):
        qgroups.figures(ioctls.qgroup_id(0, 257))
    (qgroups.directory / "mode").write_text("squota\n")
    assert qgroups.mode == "squota"
