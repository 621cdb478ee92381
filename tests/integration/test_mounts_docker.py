"""Folders bind-mounted into kernels by the agent on the real Docker engine (image
``jetyard-busybox:latest``, built by ``scripts/ensure-docker``): a kernel writes into a folder
mounted read-write and the file is on the host, in the folder's directory under the volume's
root; a kernel reads a folder mounted read-only but its write fails (non-zero exit, nothing
written); a folder whose directory is missing fails the kernel's start, naming it.

Docker is required: without it these tests fail (CI installs it), they never skip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiodocker
import pytest

from commands.node.aggregate import Node
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.settings import NatsSettings
from schemas.vfolder import Mount, folder_relpath
from services.node.identity import resolve_node_id
from services.node.logs import read_kernel_logs
from services.node.settings import AgentSettings
from tests.integration.docker_support import (
    IMAGE,
    open_docker,
    remove_containers,
    reported,
    start_agent,
)
from tests.integration.node_support import change_ledger, eventually
from tests.support import NOW


@pytest.fixture
async def machine(tmp_path: Path) -> AsyncIterator[AgentSettings]:
    """A fresh Docker machine with volume ``local`` at ``tmp_path/volume``."""
    settings = AgentSettings(
        hostname=f"dock-{new_id()}",
        cluster_id=f"c{new_id()[:8]}",
        backend="docker",
        stop_timeout_s=2,
        data_dir=tmp_path / "agent",
        volumes={"local": tmp_path / "volume"},
    )
    yield settings
    docker = await open_docker()
    try:
        await remove_containers(docker, resolve_node_id(settings), settings.cluster_id)
    finally:
        await docker.close()


def folder_dir(settings: AgentSettings, folder_id: str) -> Path:
    """The folder's directory on the host, made as the storage service lays it out."""
    where = settings.volumes["local"] / folder_relpath(folder_id)
    where.mkdir(parents=True)
    return where


def run(kernel_id: str, script: str, *mounts: Mount) -> Callable[[Node], object]:
    return lambda node: node.allocate(
        kernel_id, f"session-{kernel_id}", ResourceSlots.of(cpu="0.5", memory=64 << 20), NOW,
        image=IMAGE, command=("sh", "-c", script), mounts=mounts,
    )  # fmt: skip


def mount(folder_id: str, path: str, *, read_only: bool) -> Mount:
    return Mount(folder_id=folder_id, name="data", volume="local", path=path, read_only=read_only)


async def test_a_folder_is_writable_read_write_and_only_readable_read_only(
    bus: Bus, nats_settings: NatsSettings, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    node_id = resolve_node_id(machine)
    folder_id = f"f-{new_id()}"
    host = folder_dir(machine, folder_id)
    (host / "given.txt").write_text("from the host\n")
    writer, reader = new_id(), new_id()
    task, stopping = start_agent(machine, nats_settings)
    try:
        rw = mount(folder_id, "/home/work/data", read_only=False)
        await change_ledger(
            store, node_id, run(writer, "echo written > /home/work/data/out.txt", rw)
        )
        wrote = await eventually(lambda: reported(store, node_id, "KernelExited", writer))

        ro = mount(folder_id, "/mnt/data", read_only=True)
        script = "cat /mnt/data/given.txt && echo nope > /mnt/data/no.txt"
        await change_ledger(store, node_id, run(reader, script, ro))
        read = await eventually(lambda: reported(store, node_id, "KernelExited", reader))
    finally:
        stopping.set()
        await task

    assert wrote["exit_code"] == 0
    assert (host / "out.txt").read_text() == "written\n"
    assert read["exit_code"] != 0
    assert not (host / "no.txt").exists()
    logs = await read_kernel_logs(bus, reader)
    assert logs is not None and "from the host" in logs and "Read-only file system" in logs


async def test_a_folder_whose_directory_is_missing_fails_the_start(
    bus: Bus, nats_settings: NatsSettings, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    node_id = resolve_node_id(machine)
    machine.volumes["local"].mkdir()
    folder_id, kernel = f"f-{new_id()}", new_id()
    task, stopping = start_agent(machine, nats_settings)
    try:
        await change_ledger(
            store, node_id, run(kernel, "true", mount(folder_id, "/data", read_only=False))
        )
        failed = await eventually(lambda: reported(store, node_id, "KernelFailedToStart", kernel))
    finally:
        stopping.set()
        await task

    where = machine.volumes["local"] / folder_relpath(folder_id)
    assert failed["reason"] == (
        f"folder data on volume local: its directory {where} is missing on this node"
    )
    docker: aiodocker.Docker = await open_docker()
    try:
        assert await docker.containers.list(all=True, filters=f'{{"name": ["jy-{kernel}"]}}') == []
    finally:
        await docker.close()
