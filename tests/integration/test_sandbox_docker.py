"""A kernel's sandbox on the real Docker engine (image ``jetyard-busybox:latest``, built by
``scripts/ensure-docker``), started by the agent from its ledger as it starts every kernel: with
its group's safe defaults it holds exactly the kept capabilities (no MKNOD, SETFCAP, NET_RAW,
AUDIT_WRITE), runs with no-new-privileges and under a process limit, and cannot make a device
node in a folder mounted read-write (EPERM); a group that opens the sandbox gets exactly what it
opened. What it writes lies under a directory only root can enter
(``services.node.mounts.private_ancestor``).

Docker is required: without it these tests fail (CI installs it), they never skip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from commands.node.aggregate import Node
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.sandbox import Sandbox
from schemas.settings import NatsSettings
from schemas.vfolder import Mount, folder_relpath
from services.node.docker_config import KEPT_CAPABILITIES
from services.node.identity import resolve_node_id
from services.node.mounts import private_ancestor
from services.node.settings import AgentSettings
from tests.integration.docker_support import (
    IMAGE,
    open_docker,
    remove_containers,
    start_agent,
    started,
)
from tests.integration.node_support import change_ledger, eventually, stop
from tests.support import NOW

# Linux's capability numbers (linux/capability.h).
CAPABILITY_BITS = {
    "CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "FSETID": 4, "KILL": 5, "SETGID": 6,
    "SETUID": 7, "SETPCAP": 8, "NET_BIND_SERVICE": 10, "NET_RAW": 13, "SYS_CHROOT": 18,
    "MKNOD": 27, "AUDIT_WRITE": 29, "SETFCAP": 31,
}  # fmt: skip

# What the kernel finds out about itself, written into its folder; then it waits to be stopped.
PROBE = """
grep -E '^(CapEff|NoNewPrivs):' /proc/self/status > /data/status
cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/pids/pids.max > /data/pids 2>/dev/null
mknod /data/null c 1 3 2> /data/mknod; echo $? >> /data/mknod
mkfifo /data/fifo; echo $? > /data/fifo.rc
touch /data/done
exec sleep 600
"""


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


def run_probe(kernel_id: str, folder_id: str, sandbox: Sandbox) -> Callable[[Node], object]:
    data = Mount(folder_id=folder_id, name="data", volume="local", path="/data", read_only=False)
    return lambda node: node.allocate(
        kernel_id, f"session-{kernel_id}", ResourceSlots.of(cpu="0.5", memory=64 << 20), NOW,
        image=IMAGE, command=("sh", "-c", PROBE), mounts=(data,), sandbox=sandbox,
    )  # fmt: skip


def mask(*names: str) -> int:
    return sum(1 << CAPABILITY_BITS[name] for name in names)


async def probe(
    bus: Bus, nats_settings: NatsSettings, machine: AgentSettings, sandbox: Sandbox
) -> tuple[Path, dict[str, object]]:
    """Run the probe in a kernel with ``sandbox``: its folder on the host, and its container's
    ``HostConfig`` as Docker shows it while it runs."""
    store = EventStore(bus)
    node_id, kernel, folder_id = resolve_node_id(machine), new_id(), f"f-{new_id()}"
    host = machine.volumes["local"] / folder_relpath(folder_id)
    host.mkdir(parents=True)
    task, stopping = start_agent(machine, nats_settings)
    docker = await open_docker()
    try:
        await change_ledger(store, node_id, run_probe(kernel, folder_id, sandbox))
        container_id = await eventually(lambda: started(store, node_id, kernel))

        async def done() -> bool:
            return (host / "done").exists()

        await eventually(done, what="the probe's answers")
        shown = await (await docker.containers.get(container_id)).show()
        await change_ledger(store, node_id, stop(kernel))
    finally:
        stopping.set()
        await task
        await docker.close()
    return host, shown["HostConfig"]


def status_of(host: Path) -> dict[str, str]:
    lines = (host / "status").read_text().splitlines()
    return dict(line.split(":\t", 1) for line in lines)


async def test_a_kernel_of_a_default_group_cannot_make_devices_and_gains_no_privileges(
    bus: Bus, nats_settings: NatsSettings, machine: AgentSettings
) -> None:
    host, config = await probe(bus, nats_settings, machine, Sandbox())

    status = status_of(host)
    held = int(status["CapEff"], 16)
    assert held == mask(*KEPT_CAPABILITIES)
    for dropped in ("MKNOD", "SETFCAP", "NET_RAW", "AUDIT_WRITE"):
        assert not held & mask(dropped), dropped
    assert status["NoNewPrivs"] == "1"
    assert (host / "pids").read_text().strip() == "4096"
    # No device node in the folder: refused, and nothing made on the host's disk.
    said = (host / "mknod").read_text()
    assert said.splitlines()[-1] == "1" and "Operation not permitted" in said
    assert not (host / "null").exists()
    # A FIFO needs no capability (docs/node-agent.md): it is made, under a private directory.
    assert (host / "fifo.rc").read_text().strip() == "0"
    assert private_ancestor(host) is not None

    assert config["CapDrop"] == ["ALL"]
    assert sorted(config["CapAdd"]) == sorted(KEPT_CAPABILITIES)  # type: ignore[call-overload]
    assert config["SecurityOpt"] == ["no-new-privileges"]
    assert config["PidsLimit"] == 4096


async def test_a_group_that_opens_its_sandbox_gets_exactly_what_it_opened(
    bus: Bus, nats_settings: NatsSettings, machine: AgentSettings
) -> None:
    opened = Sandbox(no_new_privileges=False, pids_limit=None, raw_sockets=True)
    host, config = await probe(bus, nats_settings, machine, opened)

    status = status_of(host)
    assert int(status["CapEff"], 16) == mask(*KEPT_CAPABILITIES, "NET_RAW")
    assert status["NoNewPrivs"] == "0"
    assert (host / "pids").read_text().strip() == "max"
    assert (host / "mknod").read_text().splitlines()[-1] == "1"  # never a setting
    assert not (host / "null").exists()
    assert config["SecurityOpt"] is None
    assert config["PidsLimit"] in (None, 0)
