"""What ``jetyard up`` hands the storage service and the agent about volumes: the embedded
``local`` volume, an operator's ``JETYARD_STORAGE_VOLUMES`` beside it, and refusals that name
what is wrong (``jetyard/runtime/storage_setup.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jetyard.runtime.storage_setup import StorageSetup, VolumesError
from services.storage.settings import StorageSettings


def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **env: str) -> StorageSetup:
    for name in ("JETYARD_STORAGE_VOLUMES", "JETYARD_STORAGE_DEFAULT_VOLUME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("JETYARD_STORAGE_HOSTNAME", "gpu-1")
    monkeypatch.setenv("JETYARD_STORAGE_PORT", "0")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    made, _ = StorageSetup.of(tmp_path)
    return made


def test_without_operator_volumes_there_is_local_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = setup(tmp_path, monkeypatch).env()
    local = str(tmp_path / "volumes" / "local")
    assert json.loads(env["JETYARD_STORAGE_VOLUMES"]) == {
        "local": {"backend": "local", "root": local}
    }
    assert env["JETYARD_STORAGE_DEFAULT_VOLUME"] == "local"
    assert json.loads(env["JETYARD_AGENT_VOLUMES"]) == {"local": local}


def test_operator_volumes_are_served_beside_local_and_the_agent_finds_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    volumes = {
        "fast": {"backend": "btrfs", "root": "/srv/btrfs/jetyard"},
        "nfs": {"backend": "shared", "mounts": {"gpu-1": "/mnt/nfs", "*": "/net/nfs"}},
        "elsewhere": {"backend": "shared", "mounts": {"gpu-9": "/mnt/x"}},
    }
    made = setup(
        tmp_path, monkeypatch,
        JETYARD_STORAGE_VOLUMES=json.dumps(volumes), JETYARD_STORAGE_DEFAULT_VOLUME="fast",
    )  # fmt: skip
    env = made.env()
    # What the storage service reads back is what the operator wrote, plus local.
    monkeypatch.setenv("JETYARD_STORAGE_VOLUMES", env["JETYARD_STORAGE_VOLUMES"])
    monkeypatch.setenv("JETYARD_STORAGE_DEFAULT_VOLUME", env["JETYARD_STORAGE_DEFAULT_VOLUME"])
    read = StorageSettings(token_key="k" * 32)
    assert sorted(read.volumes) == ["elsewhere", "fast", "local", "nfs"]
    assert read.default_volume == "fast"
    assert json.loads(env["JETYARD_AGENT_VOLUMES"]) == {
        "local": str(tmp_path / "volumes" / "local"),
        "fast": "/srv/btrfs/jetyard",
        "nfs": "/mnt/nfs",
    }


@pytest.mark.parametrize(
    ("volumes", "said"),
    [
        ("{not json", "JETYARD_STORAGE_VOLUMES cannot be used: the value: Invalid JSON"),
        ('{"fast": {"backend": "zfs", "root": "/x"}}', "fast: Input tag 'zfs'"),
        ('{"fast": {"backend": "btrfs"}}', "fast.btrfs.root: Field required"),
        ('{"a b": {"backend": "local", "root": "/x"}}', "is not a valid id"),
        ('{"f": {"backend": "local", "root": "/x\\u0000y"}}', "cannot hold a NUL character"),
        ('{"f": {"backend": "btrfs", "root": ""}}', "f.btrfs.root: Value error, '.' is not an"),
        ('{"f": {"backend": "shared", "mounts": {"*": "rel"}}}', "'rel' is not an absolute"),
    ],
)
def test_a_volume_setting_that_cannot_be_used_is_refused_with_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, volumes: str, said: str
) -> None:
    with pytest.raises(VolumesError) as refused:
        setup(tmp_path, monkeypatch, JETYARD_STORAGE_VOLUMES=volumes)
    assert said in str(refused.value)


def test_a_default_volume_that_is_no_volume_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(VolumesError) as refused:
        setup(tmp_path, monkeypatch, JETYARD_STORAGE_DEFAULT_VOLUME="fast")
    assert str(refused.value) == (
        "JETYARD_STORAGE_DEFAULT_VOLUME is 'fast', which is no volume (volumes: local)"
    )
