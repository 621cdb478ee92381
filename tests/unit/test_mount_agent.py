"""A kernel's folders on the agent's machine (real directories under ``tmp_path``): where each
lies under its volume's root, a volume the node does not have, a missing directory, a symbolic
link or a file where the layout wants a directory, all refused with a sentence naming the
folder and the volume; the Docker bind mounts made of them; the simulated backend refusing
to start without them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schemas.resources import ResourceSlots
from schemas.vfolder import Mount, folder_relpath
from services.node.backend import KernelSpec, StartFailedError
from services.node.backend_simulated import SimulatedBackend
from services.node.docker_config import container_config
from services.node.mounts import check_host_mounts, host_mounts

FOLDER = "f0lder-0001"
IMAGE = "jetyard-busybox:latest"


def mount(read_only: bool = False, volume: str = "local", path: str = "/home/work/data") -> Mount:
    return Mount(folder_id=FOLDER, name="data", volume=volume, path=path, read_only=read_only)


def made(root: Path) -> Path:
    """The folder's directory, as the storage service lays it out."""
    where = root / folder_relpath(FOLDER)
    where.mkdir(parents=True)
    return where


def spec(root: Path, *mounts: Mount) -> KernelSpec:
    return KernelSpec(
        kernel_id="k1",
        session_id="s1",
        image=IMAGE,
        command=None,
        slots=ResourceSlots.of(cpu=1, memory=64 << 20),
        mounts=host_mounts(mounts, {"local": root}),
    )


def test_a_mount_lies_under_its_volumes_root(tmp_path: Path) -> None:
    where = made(tmp_path)

    (found,) = host_mounts([mount(read_only=True)], {"local": tmp_path})

    assert found.source == where
    assert (found.target, found.read_only, found.name) == ("/home/work/data", True, "data")
    check_host_mounts([found])  # there and real: nothing to say


def test_a_volume_this_node_lacks_fails_the_start(tmp_path: Path) -> None:
    with pytest.raises(StartFailedError) as refused:
        host_mounts([mount(volume="nfs")], {"local": tmp_path})

    assert str(refused.value) == (
        "folder data is on volume nfs, which this node does not have (its volumes: local; "
        "JETYARD_AGENT_VOLUMES)"
    )


def test_a_missing_directory_fails_the_start(tmp_path: Path) -> None:
    mounts = host_mounts([mount()], {"local": tmp_path})

    with pytest.raises(StartFailedError) as refused:
        check_host_mounts(mounts)

    where = tmp_path / folder_relpath(FOLDER)
    assert str(refused.value) == (
        f"folder data on volume local: its directory {where} is missing on this node"
    )


def test_a_volume_root_that_is_not_there_fails_the_start(tmp_path: Path) -> None:
    mounts = host_mounts([mount()], {"local": tmp_path / "absent"})

    with pytest.raises(StartFailedError, match="the volume is not mounted on this node"):
        check_host_mounts(mounts)


def test_a_symbolic_link_for_the_folder_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "volume"
    where = root / folder_relpath(FOLDER)
    where.parent.mkdir(parents=True)
    os.symlink(elsewhere, where)

    with pytest.raises(StartFailedError) as refused:
        check_host_mounts(host_mounts([mount()], {"local": root}))

    assert str(refused.value) == (
        f"folder data on volume local: {where} is a symbolic link, not a directory"
    )


def test_a_symbolic_link_above_the_folder_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "volume"
    root.mkdir()
    bucket = folder_relpath(FOLDER).parts[0]
    target = tmp_path / "other"
    (target / folder_relpath(FOLDER).relative_to(bucket)).mkdir(parents=True)
    os.symlink(target, root / bucket)

    with pytest.raises(StartFailedError, match="is a symbolic link"):
        check_host_mounts(host_mounts([mount()], {"local": root}))


def test_a_file_where_the_folder_should_be_fails_the_start(tmp_path: Path) -> None:
    where = tmp_path / folder_relpath(FOLDER)
    where.parent.mkdir(parents=True)
    where.write_text("not a folder")

    with pytest.raises(StartFailedError, match=f"{where} is not a directory"):
        check_host_mounts(host_mounts([mount()], {"local": tmp_path}))


def test_docker_binds_each_folder_read_only_where_asked(tmp_path: Path) -> None:
    where = made(tmp_path)
    rw = mount()
    ro = rw.model_copy(update={"path": "/mnt/ro", "read_only": True})

    config = container_config(spec(tmp_path, rw, ro), "node-1", cluster_id="", stop_timeout_s=10)

    assert config["HostConfig"]["Mounts"] == [
        {"Type": "bind", "Source": str(where), "Target": "/home/work/data", "ReadOnly": False},
        {"Type": "bind", "Source": str(where), "Target": "/mnt/ro", "ReadOnly": True},
    ]


def test_no_mounts_no_mount_config(tmp_path: Path) -> None:
    config = container_config(spec(tmp_path), "node-1", cluster_id="", stop_timeout_s=10)

    assert "Mounts" not in config["HostConfig"]


async def test_the_simulated_backend_records_mounts_and_needs_their_directories(
    tmp_path: Path,
) -> None:
    backend = SimulatedBackend("node-1", [IMAGE])
    wanted = spec(tmp_path, mount(read_only=True))

    with pytest.raises(StartFailedError, match="is missing on this node"):
        await backend.start(wanted)
    assert await backend.containers() == []

    where = made(tmp_path)
    await backend.start(wanted)
    launch = backend.launch_of("k1")
    assert launch is not None
    assert launch.spec.mounts == wanted.mounts
    assert launch.config["HostConfig"]["Mounts"] == [
        {"Type": "bind", "Source": str(where), "Target": "/home/work/data", "ReadOnly": True}
    ]
