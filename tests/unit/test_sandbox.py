"""A kernel's sandbox, from its resource group to its container: the scheduler puts the group's
``Sandbox`` on each allocation it makes, the ledger keeps it (an allocation stored before it
existed loads with the safe defaults), the agent's Docker configuration holds the kernel to it;
and a folder is mounted read-write only where nothing written there can run set-uid or act as a
device for another user of the host (real directories)."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from events.domain.node import ResourcesAllocated
from schemas.resources import ResourceSlots
from schemas.sandbox import SAFE_SANDBOX, Sandbox
from schemas.tenancy import GroupScheduling
from schemas.vfolder import Mount, folder_relpath
from services.node.backend import HostMount, KernelSpec, StartFailedError
from services.node.docker_config import KEPT_CAPABILITIES, container_config, sandbox_config
from services.node.mounts import check_host_mounts, host_mounts, private_ancestor
from tests.unit.pass_support import World, slots

OPENED = Sandbox(no_new_privileges=False, pids_limit=None, raw_sockets=True)

# ---- from the group to the ledger ---------------------------------------------------------


async def test_each_allocation_carries_its_groups_sandbox() -> None:
    world = World()
    await world.tenancy(scheduling=GroupScheduling(sandbox=OPENED))
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    await world.decide()
    session_id = await world.create(slots(cpu=2, mem=4))
    mark = world.last_seq()

    await world.decide()

    ((ledger, allocated),) = world.stored(ResourcesAllocated, after=mark)
    assert (ledger, allocated.session_id, allocated.sandbox) == (node_id, session_id, OPENED)
    kernel = world.state.sessions[session_id].session.main_kernel
    assert (await world.ledger(node_id)).allocations[kernel].sandbox == OPENED


def test_an_allocation_stored_before_sandboxes_loads_with_the_safe_defaults() -> None:
    stored = {"kernel_id": "k1", "session_id": "s1", "slots": {"cpu_milli": 1000}}
    assert ResourcesAllocated.model_validate(stored).sandbox == SAFE_SANDBOX
    assert Sandbox(no_new_privileges=True, pids_limit=4096, raw_sockets=False) == SAFE_SANDBOX


# ---- from the allocation to the container -------------------------------------------------


def spec(sandbox: Sandbox = SAFE_SANDBOX) -> KernelSpec:
    return KernelSpec(
        kernel_id="k1",
        session_id="s1",
        image="jetyard-busybox:latest",
        command=None,
        slots=ResourceSlots.of(cpu=1, memory=64 << 20),
        sandbox=sandbox,
    )


def test_a_kernel_holds_only_the_kept_capabilities_without_new_privileges_and_few_pids() -> None:
    host = container_config(spec(), "n1", cluster_id="", stop_timeout_s=5)["HostConfig"]

    assert host["CapDrop"] == ["ALL"]
    assert host["CapAdd"] == sorted(KEPT_CAPABILITIES)
    for never in ("MKNOD", "SETFCAP", "AUDIT_WRITE", "NET_RAW", "SYS_ADMIN"):
        assert never not in host["CapAdd"]
    for kept in ("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "KILL"):
        assert kept in host["CapAdd"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == 4096
    assert host["Init"] is True


def test_a_group_opens_raw_sockets_new_privileges_and_pids_but_never_device_nodes() -> None:
    host = sandbox_config(OPENED)

    assert host == {"CapDrop": ["ALL"], "CapAdd": sorted([*KEPT_CAPABILITIES, "NET_RAW"])}
    assert sandbox_config(Sandbox(pids_limit=64))["PidsLimit"] == 64


# ---- what a read-write folder may hold ---------------------------------------------------


def mount(root: Path, *, read_only: bool = False) -> list[HostMount]:
    data = Mount(folder_id="f-1", name="data", volume="local", path="/data", read_only=read_only)
    (root / folder_relpath("f-1")).mkdir(parents=True)
    return list(host_mounts([data], {"local": root}))


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user of the host can enter (in /tmp, not under pytest's private one)."""
    made = Path(tempfile.mkdtemp(prefix="jy-private-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made)


def on_nosuid(path: Path) -> bool:
    flags = os.statvfs(path).f_flag
    return bool(flags & os.ST_NOSUID and flags & os.ST_NODEV)


def test_a_folder_under_a_private_directory_is_mounted_as_it_is(tmp_path: Path) -> None:
    root = tmp_path / "volume"
    mounts = mount(root)
    root.chmod(0o755)

    check_host_mounts(mounts)

    assert stat.S_IMODE(root.stat().st_mode) == 0o755  # under pytest's own private directory
    assert private_ancestor(mounts[0].source) is not None


def test_an_open_volume_root_of_the_agents_own_is_made_private(
    open_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = open_dir / "volume"
    mounts = mount(root)
    root.chmod(0o755)
    if on_nosuid(root):
        check_host_mounts(mounts)  # nosuid,nodev: nothing to make private
        assert stat.S_IMODE(root.stat().st_mode) == 0o755
        return

    with caplog.at_level(logging.WARNING, "services.node.mounts"):
        check_host_mounts(mounts)

    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert private_ancestor(mounts[0].source) == root
    assert f"volume local: {root} was open to other users" in caplog.text


def test_a_read_only_folder_is_left_as_it_is(open_dir: Path) -> None:
    root = open_dir / "volume"
    mounts = mount(root, read_only=True)
    root.chmod(0o755)

    check_host_mounts(mounts)

    assert stat.S_IMODE(root.stat().st_mode) == 0o755


def test_an_open_volume_root_of_another_user_fails_the_start_saying_what_to_do(
    open_dir: Path,
) -> None:
    # Giving a directory away takes root (the Docker tests' user is root-equivalent anyway).
    root = open_dir / "volume"
    mounts = mount(root)
    root.chmod(0o755)
    os.chown(root, 65534, 65534)
    if on_nosuid(root):
        check_host_mounts(mounts)
        return

    with pytest.raises(StartFailedError) as refused:
        check_host_mounts(mounts)

    assert str(refused.value) == (
        f"folder data on volume local: what a session writes there could run set-uid on this "
        f"host ({root} is mounted without nosuid,nodev, other users can enter it, and this "
        f"agent cannot close it: owned by uid 65534): mount it nosuid,nodev, or keep it under "
        f"a directory only root or uid {os.geteuid()} can enter"
    )
    assert stat.S_IMODE(root.stat().st_mode) == 0o755
