"""The node agent against the real Docker engine (image ``jetyard-busybox:latest``, built by
``scripts/ensure-docker``), started through its entry point ``services.node.app.run``: its node
id kept in its data directory, containers labelled with its installation and node, kernels run,
stopped, re-attached after a crash, and two agents on one engine never touching each other's.

Docker is required: without it these tests fail (CI installs it), they never skip.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from commands.agent import Agent
from commands.repository import load
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.settings import NatsSettings
from services.node.backend import (
    LABEL_CLUSTER,
    LABEL_KERNEL,
    LABEL_MANAGED,
    LABEL_NODE,
    LABEL_SESSION,
    KernelSpec,
)
from services.node.backend_docker import DockerBackend
from services.node.identity import NODE_ID_FILE, resolve_node_id
from services.node.logs import read_kernel_logs
from services.node.settings import AgentSettings
from services.node.topology import format_cpulist, numa_nodes
from tests.integration.docker_support import (
    IMAGE,
    SLEEP,
    gone,
    kill,
    open_docker,
    remove_containers,
    reported,
    start_agent,
    started,
)
from tests.integration.node_support import (
    allocate,
    change_ledger,
    eventually,
    facts_about,
    stop,
)


@pytest.fixture(scope="module")
async def docker() -> AsyncIterator[aiodocker.Docker]:
    client = await open_docker()
    yield client
    await client.close()


def settings_for(data_dir: Path, **fields: Any) -> AgentSettings:
    """A fresh machine's agent: unique host name and cluster id (the server is shared)."""
    defaults: dict[str, Any] = {
        "hostname": f"dock-{new_id()}",
        "cluster_id": f"c{new_id()[:8]}",
        "backend": "docker",
        "stop_timeout_s": 2,
        "data_dir": data_dir,
    }
    return AgentSettings(**(defaults | fields))


@pytest.fixture
async def machine(docker: aiodocker.Docker, tmp_path: Path) -> AsyncIterator[AgentSettings]:
    """Settings for a fresh machine; its containers are removed afterwards."""
    settings = settings_for(tmp_path / "agent")
    yield settings
    await remove_containers(docker, resolve_node_id(settings), settings.cluster_id)


async def epoch(store: EventStore, node_id: str) -> int:
    agent = (await load(store, Agent, node_id)).aggregate
    return agent.epoch if agent is not None else 0


async def test_a_kernel_runs_in_a_limited_labelled_container_and_stops_on_request(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    settings = machine
    node_id, kernel = resolve_node_id(settings), new_id()
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
        assert labels[LABEL_CLUSTER] == settings.cluster_id
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
    node_id, kernel, bad = resolve_node_id(settings), new_id(), new_id()
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
        resolve_node_id(settings),
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


async def test_a_kernel_runs_with_its_host_name_cluster_env_and_pinned_to_its_numa_node(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    settings = machine
    node_id, kernel = resolve_node_id(settings), new_id()
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


async def test_two_agents_on_one_host_are_two_nodes_that_never_touch_each_others_containers(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, tmp_path: Path
) -> None:
    # One machine, one host name, one installation, one Docker engine: two data directories.
    mine = settings_for(tmp_path / "mine", resync_interval_s=0.3)
    theirs = mine.model_copy(update={"data_dir": tmp_path / "theirs"})
    store, kernel = EventStore(bus), new_id()
    first, stop_first = start_agent(mine, nats_settings)
    second, stop_second = start_agent(theirs, nats_settings)
    try:
        # Each made its own id on its first start, before registering under it.
        mine_id, theirs_id = await eventually(
            lambda: _kept_ids(mine.data_dir, theirs.data_dir), what="both node ids"
        )
        assert mine_id != theirs_id
        await eventually(lambda: _is(epoch(store, theirs_id), 1), what="the other's start")
        await change_ledger(store, mine_id, allocate(kernel, image=IMAGE, command=SLEEP))
        container_id = await eventually(lambda: started(store, mine_id, kernel))
        await asyncio.sleep(1.5)  # several of the other agent's reconcile passes
        shown = await (await docker.containers.get(container_id)).show()
        assert shown["State"]["Running"]  # the other agent left it alone
        labels = shown["Config"]["Labels"]
        assert (labels[LABEL_CLUSTER], labels[LABEL_NODE]) == (mine.cluster_id, mine_id)
        assert await facts_about(store, theirs_id, kernel) == []  # never reported as its own
    finally:
        stop_first.set()
        stop_second.set()
        await first
        await second
        for settings in (mine, theirs):
            await remove_containers(docker, resolve_node_id(settings), settings.cluster_id)


async def _kept_ids(*data_dirs: Path) -> tuple[str, ...] | None:
    paths = [d / NODE_ID_FILE for d in data_dirs]
    if not all(p.exists() for p in paths):
        return None
    return tuple(p.read_text().strip() for p in paths)


async def test_docker_backends_list_only_containers_with_both_their_labels(
    docker: aiodocker.Docker,
) -> None:
    # Same node id in two installations, and two nodes of one installation, on one engine.
    node, other_node = f"n-{new_id()}", f"n-{new_id()}"
    cluster, other_cluster = f"c{new_id()[:8]}", f"c{new_id()[:8]}"
    owners = [(cluster, node), (other_cluster, node), (cluster, other_node)]
    backends = [await DockerBackend.connect(n, cluster_id=c, stop_timeout_s=1) for c, n in owners]
    kernels = [new_id() for _ in owners]
    try:
        for backend, kernel in zip(backends, kernels, strict=True):
            spec = KernelSpec(kernel_id=kernel, session_id=f"s-{kernel}", image=IMAGE,
                              command=SLEEP)  # fmt: skip
            await backend.start(spec)
        listed = [[c.kernel_id for c in await b.containers()] for b in backends]
    finally:
        for backend, (c, n) in zip(backends, owners, strict=True):
            await backend.close()
            await remove_containers(docker, n, c)

    assert listed == [[k] for k in kernels]


async def _exited(docker: aiodocker.Docker, container_id: str) -> bool:
    state = (await (await docker.containers.get(container_id)).show())["State"]
    return not state["Running"]


async def _is(value: Any, wanted: object) -> bool:
    return bool(await value == wanted)


async def test_a_busy_containers_cpu_time_grows_and_a_gone_ones_is_unknown(
    docker: aiodocker.Docker,
) -> None:
    node, cluster = f"n-{new_id()}", f"c{new_id()[:8]}"
    backend = await DockerBackend.connect(node, cluster_id=cluster, stop_timeout_s=1)
    kernel = new_id()
    try:
        spec = KernelSpec(kernel_id=kernel, session_id=f"s-{kernel}", image=IMAGE,
                          command=("sh", "-c", "while :; do :; done"))  # fmt: skip
        container_id = await backend.start(spec)
        first = await backend.cpu_seconds(container_id)

        async def grew() -> bool:
            now = await backend.cpu_seconds(container_id)
            return first is not None and now is not None and now > first + 0.2

        await eventually(grew, what="CPU time to grow")
        await backend.remove(container_id)
        assert await backend.cpu_seconds(container_id) is None
    finally:
        await backend.close()
        await remove_containers(docker, node, cluster)
