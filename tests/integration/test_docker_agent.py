"""The node agent against the real Docker engine (image ``jetyard-busybox:latest``, built by
``scripts/ensure-docker``), started through its entry point ``services.node.app.run``.

Docker is required: without it these tests fail (CI installs it), they never skip.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiodocker
import pytest

from commands.agent import Agent
from commands.repository import load
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id, node_id_for_host
from schemas.settings import NatsSettings
from services.node import app
from services.node.backend import LABEL_KERNEL, LABEL_MANAGED, LABEL_NODE, LABEL_SESSION
from services.node.logs import read_kernel_logs
from services.node.settings import AgentSettings
from services.node.topology import format_cpulist, numa_nodes
from tests.integration.node_support import (
    allocate,
    change_ledger,
    eventually,
    facts,
    facts_about,
    stop,
)

IMAGE = "jetyard-busybox:latest"
SLEEP = ("sleep", "600")


@pytest.fixture(scope="module")
async def docker() -> AsyncIterator[aiodocker.Docker]:
    client: aiodocker.Docker | None = None
    try:
        client = aiodocker.Docker()
        await asyncio.wait_for(client.version(), timeout=5)
        await client.images.inspect(IMAGE)
    except Exception as exc:
        if client is not None:
            await client.close()
        pytest.fail(
            f"the Docker tests need a Docker engine and the image {IMAGE} ({exc!r}): "
            "run scripts/ensure-docker",
            pytrace=False,
        )
    yield client
    await client.close()


@pytest.fixture
async def machine(docker: aiodocker.Docker) -> AsyncIterator[AgentSettings]:
    """Settings for a fresh machine (unique host name: the server is shared); its containers
    are removed afterwards."""
    settings = AgentSettings(hostname=f"dock-{new_id()}", backend="docker", stop_timeout_s=2)
    yield settings
    node = f"{LABEL_NODE}={node_id_for_host(settings.hostname)}"
    for container in await docker.containers.list(all=True, filters=json.dumps({"label": [node]})):
        await container.delete(force=True)


def start_agent(
    settings: AgentSettings, nats: NatsSettings
) -> tuple[asyncio.Task[None], asyncio.Event]:
    stopping = asyncio.Event()
    return asyncio.create_task(app.run(settings, nats, stopping)), stopping


async def kill(task: asyncio.Task[None]) -> None:
    """End the agent abruptly, as SIGKILL would: it stops nothing on its way out."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def epoch(store: EventStore, node_id: str) -> int:
    agent = (await load(store, Agent, node_id)).aggregate
    return agent.epoch if agent is not None else 0


async def started(store: EventStore, node_id: str, kernel_id: str) -> str | None:
    for name, payload in await facts(store, node_id):
        if name == "KernelStarted" and payload["kernel_id"] == kernel_id:
            return str(payload["container_id"])
    return None


async def reported(
    store: EventStore, node_id: str, name: str, kernel_id: str
) -> dict[str, Any] | None:
    for found, payload in await facts(store, node_id):
        if found == name and payload["kernel_id"] == kernel_id:
            return payload
    return None


async def gone(docker: aiodocker.Docker, container_id: str) -> bool:
    try:
        await docker.containers.get(container_id)
    except aiodocker.DockerError as exc:
        return exc.status == 404
    return False


async def test_a_kernel_runs_in_a_limited_labelled_container_and_stops_on_request(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    settings = machine
    node_id, kernel = node_id_for_host(settings.hostname), new_id()
    task, stopping = start_agent(settings, nats_settings)
    try:
        await change_ledger(store, node_id, allocate(kernel, image=IMAGE, command=SLEEP))
        container_id = await eventually(lambda: started(store, node_id, kernel))

        shown = await (await docker.containers.get(container_id)).show()
        assert shown["Name"] == f"/jy-{kernel}"
        assert shown["State"]["Running"]
        assert shown["HostConfig"]["NanoCpus"] == 500_000_000
        assert shown["HostConfig"]["Memory"] == shown["HostConfig"]["MemorySwap"] == 64 << 20
        assert shown["HostConfig"]["Init"] is True
        labels = shown["Config"]["Labels"]
        assert labels[LABEL_MANAGED] == "true"
        assert (labels[LABEL_NODE], labels[LABEL_KERNEL]) == (node_id, kernel)
        assert labels[LABEL_SESSION] == f"session-{kernel}"

        await change_ledger(store, node_id, stop(kernel))
        ended = await eventually(lambda: reported(store, node_id, "KernelExited", kernel))
        await eventually(lambda: gone(docker, container_id), what="container removed")
    finally:
        stopping.set()
        await task
    assert (ended["exit_code"], ended["reason"]) == (143, "stopped on request")  # SIGTERM via init


async def test_an_exit_code_and_the_output_outlive_the_container(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    settings = machine
    node_id, kernel, bad = node_id_for_host(settings.hostname), new_id(), new_id()
    task, stopping = start_agent(settings, nats_settings)
    try:
        command = ("sh", "-c", "echo hello; exit 3")
        await change_ledger(store, node_id, allocate(kernel, image=IMAGE, command=command))
        await change_ledger(store, node_id, allocate(bad, image="jetyard-no-such-image:1"))
        ended = await eventually(lambda: reported(store, node_id, "KernelExited", kernel))
        failed = await eventually(lambda: reported(store, node_id, "KernelFailedToStart", bad))
        container_id = await started(store, node_id, kernel)
        assert container_id is not None
        await eventually(lambda: gone(docker, container_id), what="container removed")
    finally:
        stopping.set()
        await task

    assert (ended["exit_code"], ended["reason"]) == (3, "exited")
    assert await read_kernel_logs(bus, kernel) == "hello\n"
    assert "jetyard-no-such-image:1" in failed["reason"]
    assert await facts_about(store, node_id, bad) == ["KernelFailedToStart"]
    listed = await docker.containers.list(all=True, filters=json.dumps({"name": [f"jy-{bad}"]}))
    assert listed == []


async def test_a_killed_agent_is_replaced_by_one_that_re_attaches_and_sees_exits(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    settings = machine
    node_id, stays, dies, later = (
        node_id_for_host(settings.hostname),
        new_id(),
        new_id(),
        new_id(),
    )
    trap = ("sh", "-c", "trap 'exit 7' USR1; while true; do sleep 0.1; done")
    task, _ = start_agent(settings, nats_settings)
    await change_ledger(store, node_id, allocate(stays, image=IMAGE, command=SLEEP))
    await change_ledger(store, node_id, allocate(dies, image=IMAGE, command=trap))
    stays_id = await eventually(lambda: started(store, node_id, stays))
    dies_id = await eventually(lambda: started(store, node_id, dies))

    await kill(task)
    # While no agent runs, one kernel ends on its own.
    await docker.containers.container(dies_id).kill(signal="SIGUSR1")
    await eventually(
        lambda: _exited(docker, dies_id), what="the kernel to exit while the agent is down"
    )

    task, stopping = start_agent(settings, nats_settings)
    try:
        await eventually(lambda: _is(epoch(store, node_id), 2), what="epoch 2")
        ended = await eventually(lambda: reported(store, node_id, "KernelExited", dies))
        # A kernel allocated now is started by the same passes that re-attached the others.
        await change_ledger(store, node_id, allocate(later, image=IMAGE, command=SLEEP))
        await eventually(lambda: started(store, node_id, later))
        await eventually(lambda: gone(docker, dies_id), what="exited container removed")
    finally:
        stopping.set()
        await task

    assert (ended["exit_code"], ended["reason"]) == (7, "exited")
    assert await facts_about(store, node_id, stays) == ["KernelStarted"]  # no second start
    assert (await (await docker.containers.get(stays_id)).show())["State"]["Running"]
    named = await docker.containers.list(all=True, filters=json.dumps({"name": [f"jy-{stays}"]}))
    assert [c.id for c in named] == [stays_id]  # no second container


async def _exited(docker: aiodocker.Docker, container_id: str) -> bool:
    state = (await (await docker.containers.get(container_id)).show())["State"]
    return not state["Running"]


async def _is(value: Any, wanted: object) -> bool:
    return bool(await value == wanted)


async def test_a_kernel_runs_with_its_host_name_cluster_env_and_pinned_to_its_numa_node(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    settings = machine
    node_id, kernel = node_id_for_host(settings.hostname), new_id()
    # The CPUs of NUMA node 0 as this machine's sysfs lists them (the agent reads the same).
    node0 = next((n.cpus for n in numa_nodes() if n.node == 0), ())
    show = "hostname; echo $JETYARD_CLUSTER_ROLE; grep Cpus_allowed_list /proc/self/status"
    cluster = {"JETYARD_CLUSTER_ROLE": "main", "JETYARD_CLUSTER_HOST": "main1"}
    task, stopping = start_agent(settings, nats_settings)
    try:
        await change_ledger(
            store,
            node_id,
            allocate(kernel, image=IMAGE, command=("sh", "-c", show), env=cluster,
                     hostname="main1", numa_node=0),
        )  # fmt: skip
        ended = await eventually(lambda: reported(store, node_id, "KernelExited", kernel))
    finally:
        stopping.set()
        await task

    assert ended["exit_code"] == 0
    pinned = format_cpulist(node0)
    output = await read_kernel_logs(bus, kernel) or ""
    assert output.split("\n")[:2] == ["main1", "main"]
    if pinned:  # a machine whose sysfs has no NUMA tree pins nothing (and says so in docs)
        assert output.split("\n")[2].split() == ["Cpus_allowed_list:", pinned]


async def test_two_installations_on_one_engine_never_touch_each_others_containers(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker
) -> None:
    # Same machine, same host name, one Docker engine: only the cluster ids differ.
    host = f"dock-{new_id()}"
    mine, theirs = (
        AgentSettings(
            hostname=host, cluster_id=name + new_id()[:8], backend="docker",
            stop_timeout_s=2, resync_interval_s=0.3,
        )
        for name in ("mine", "theirs")
    )  # fmt: skip
    assert mine.node_id != theirs.node_id
    store, kernel = EventStore(bus), new_id()
    first, stop_first = start_agent(mine, nats_settings)
    second, stop_second = start_agent(theirs, nats_settings)
    try:
        await change_ledger(store, mine.node_id, allocate(kernel, image=IMAGE, command=SLEEP))
        container_id = await eventually(lambda: started(store, mine.node_id, kernel))
        await asyncio.sleep(1.5)  # several of the other agent's reconcile passes
        shown = await (await docker.containers.get(container_id)).show()
        assert shown["State"]["Running"]  # the other installation left it alone
        assert shown["Config"]["Labels"][LABEL_NODE] == mine.node_id
        assert await facts_about(store, theirs.node_id, kernel) == []  # never reported as its own
    finally:
        stop_first.set()
        stop_second.set()
        await first
        await second
        for settings in (mine, theirs):
            node = f"{LABEL_NODE}={settings.node_id}"
            listed = await docker.containers.list(all=True, filters=json.dumps({"label": [node]}))
            for container in listed:
                await container.delete(force=True)
