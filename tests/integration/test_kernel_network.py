"""A cluster session's kernels on one node, on the real Docker engine (image
``jetyard-busybox:latest``, built by ``scripts/ensure-docker``): they reach each other by their
host names on a network of their session's own; another session's kernel neither resolves nor
reaches them; the network is made once though its kernels start at once, outlives an agent
restart, and goes with the session's last container.

Docker is required: without it these tests fail (CI installs it), they never skip.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from commands.agent import Agent
from commands.node.aggregate import Node
from commands.repository import load
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.sandbox import Sandbox
from schemas.settings import NatsSettings
from services.node.backend import LABEL_SESSION, KernelSpec, owner_labels
from services.node.backend_docker import DockerBackend
from services.node.identity import resolve_node_id
from services.node.networks import network_name
from services.node.settings import AgentSettings
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
from tests.integration.node_support import change_ledger, eventually, stop
from tests.support import NOW

SLOTS = ResourceSlots.of(cpu="0.25", memory=32 << 20)


@pytest.fixture(scope="module")
async def docker() -> AsyncIterator[aiodocker.Docker]:
    client = await open_docker()
    yield client
    await client.close()


@pytest.fixture
async def machine(docker: aiodocker.Docker, tmp_path: Path) -> AsyncIterator[AgentSettings]:
    """A fresh machine's agent settings; its containers and networks are removed afterwards."""
    settings = AgentSettings(
        hostname=f"net-{new_id()}",
        cluster_id=f"c{new_id()[:8]}",
        backend="docker",
        stop_timeout_s=1,
        resync_interval_s=0.5,
        data_dir=tmp_path / "agent",
    )
    yield settings
    node_id = resolve_node_id(settings)
    await remove_containers(docker, node_id, settings.cluster_id)
    for network in await _networks(docker, settings):
        await (await docker.networks.get(network["Id"])).delete()


PINGING = Sandbox(raw_sockets=True)
"""busybox's ping opens a raw socket: these sessions' group allows them (none does by default)."""


class Session:
    """A session's kernels on one node, as the scheduler would allocate them: one kernel runs
    on the default bridge; several are a cluster (``main1``, ``sub1``…)."""

    def __init__(self, size: int) -> None:
        self.id = f"session-{new_id()}"
        self.kernels = [new_id() for _ in range(size)]
        self.hosts = ["main1", *(f"sub{i}" for i in range(1, size))] if size > 1 else [""]

    def allocate(self) -> Callable[[Node], object]:
        def decide(node: Node) -> None:
            for kernel, host in zip(self.kernels, self.hosts, strict=True):
                node.allocate(
                    kernel, self.id, SLOTS, NOW, image=IMAGE, command=SLEEP, hostname=host,
                    sandbox=PINGING,
                )  # fmt: skip

        return decide

    def stop(self) -> Callable[[Node], object]:
        def decide(node: Node) -> None:
            for kernel in self.kernels:
                stop(kernel)(node)

        return decide

    async def start(self, store: EventStore, node_id: str) -> list[str]:
        """Allocate (every kernel in one ledger change: one pass starts them concurrently) and
        wait until each started; their container ids."""
        await change_ledger(store, node_id, self.allocate())
        return [await eventually(partial(started, store, node_id, k)) for k in self.kernels]


async def _networks(docker: aiodocker.Docker, settings: AgentSettings) -> list[dict[str, Any]]:
    owned = owner_labels(settings.cluster_id, resolve_node_id(settings))
    return await docker.networks.list(filters={"label": [f"{k}={v}" for k, v in owned.items()]})


async def _session_networks(
    docker: aiodocker.Docker, settings: AgentSettings, session: Session
) -> list[str]:
    """Ids of this node's networks labelled with ``session``'s id."""
    return [
        n["Id"]
        for n in await _networks(docker, settings)
        if (n.get("Labels") or {}).get(LABEL_SESSION) == session.id
    ]


async def _addresses(docker: aiodocker.Docker, container_id: str) -> dict[str, str]:
    """The container's address on each network it is on, by network name."""
    shown = await (await docker.containers.get(container_id)).show()
    networks: dict[str, Any] = shown["NetworkSettings"]["Networks"]
    return {name: str(n["IPAddress"]) for name, n in networks.items()}


async def _run(docker: aiodocker.Docker, container_id: str, *command: str) -> tuple[int, str]:
    """Run ``command`` in the container (as ``docker exec``): its exit code and output."""
    execution = await docker.containers.container(container_id).exec(list(command))
    output: list[str] = []
    async with execution.start(detach=False) as stream:
        while (message := await stream.read_out()) is not None:
            output.append(message.data.decode(errors="replace"))
    return int((await execution.inspect())["ExitCode"]), "".join(output)


async def _epoch(store: EventStore, node_id: str) -> int | None:
    agent = (await load(store, Agent, node_id)).aggregate
    return agent.epoch if agent is not None else None


async def test_a_cluster_sessions_kernels_ping_each_other_by_name_and_no_other_session_reaches_them(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    node_id = resolve_node_id(machine)
    ours, theirs, single = Session(2), Session(2), Session(1)
    task, stopping = start_agent(machine, nats_settings)
    try:
        main, sub = await ours.start(store, node_id)
        their_main, _ = await theirs.start(store, node_id)
        (lone,) = await single.start(store, node_id)

        # One network for the session, though both kernels started at once, and only it.
        network = network_name(ours.id, node_id, machine.cluster_id)
        assert len(await _session_networks(docker, machine, ours)) == 1
        main_ip = (await _addresses(docker, main))[network]
        sub_ip = (await _addresses(docker, sub))[network]
        assert list(await _addresses(docker, main)) == [network]  # not on the default bridge

        assert (await _run(docker, main, "ping", "-c1", "-W2", "sub1"))[0] == 0
        assert (await _run(docker, sub, "ping", "-c1", "-W2", "main1"))[0] == 0
        code, answer = await _run(docker, sub, "nslookup", "main1")
        assert code == 0 and main_ip in answer

        # Another cluster session's main1 is its own kernel, and ours cannot be reached.
        code, answer = await _run(docker, their_main, "nslookup", "sub1")
        assert code == 0 and sub_ip not in answer and main_ip not in answer
        for ip in (main_ip, sub_ip):
            assert (await _run(docker, their_main, "ping", "-c1", "-W1", ip))[0] != 0
        # A single-kernel session (on the default bridge) resolves neither name, reaches neither.
        for name in ("main1", "sub1"):
            assert (await _run(docker, lone, "nslookup", name))[0] != 0
        for ip in (main_ip, sub_ip):
            assert (await _run(docker, lone, "ping", "-c1", "-W1", ip))[0] != 0

        # The session ends: its containers are removed, then its network; the other's stays.
        await change_ledger(store, node_id, ours.stop())
        for kernel, container in zip(ours.kernels, (main, sub), strict=True):
            await eventually(partial(reported, store, node_id, "KernelExited", kernel))
            await eventually(partial(gone, docker, container), what="container removed")
        await eventually(
            lambda: _no(_session_networks(docker, machine, ours)), what="network removed"
        )
        assert len(await _session_networks(docker, machine, theirs)) == 1
    finally:
        stopping.set()
        await task


async def test_an_agent_restarted_mid_session_keeps_the_network_and_removes_a_left_over_one(
    bus: Bus, nats_settings: NatsSettings, docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    store = EventStore(bus)
    node_id = resolve_node_id(machine)
    running, abandoned = Session(2), Session(2)
    task, _ = start_agent(machine, nats_settings)
    main, sub = await running.start(store, node_id)
    left = await abandoned.start(store, node_id)
    before = await _session_networks(docker, machine, running)
    assert len(await _session_networks(docker, machine, abandoned)) == 1

    await kill(task)
    # While no agent runs, one session's containers go (as if the agent died after removing
    # them, before removing their network).
    for container in left:
        await (docker.containers.container(container)).delete(force=True)

    task, stopping = start_agent(machine, nats_settings)
    try:
        await eventually(lambda: _is(_epoch(store, node_id), 2), what="epoch 2")
        await eventually(
            lambda: _no(_session_networks(docker, machine, abandoned)),
            what="the left-over network removed",
        )
        await eventually(
            lambda: reported(store, node_id, "KernelExited", abandoned.kernels[0]),
            what="the vanished kernel reported",
        )
        assert await _session_networks(docker, machine, running) == before  # not made again
        assert (await _run(docker, main, "ping", "-c1", "-W2", "sub1"))[0] == 0
        assert (await _run(docker, sub, "ping", "-c1", "-W2", "main1"))[0] == 0
    finally:
        stopping.set()
        await task


async def test_kernels_of_one_session_started_at_once_make_one_network_and_leave_none(
    docker: aiodocker.Docker, machine: AgentSettings
) -> None:
    session = Session(4)
    backend = DockerBackend(
        docker, resolve_node_id(machine), cluster_id=machine.cluster_id, stop_timeout_s=1
    )
    specs = [
        KernelSpec(kernel, session.id, IMAGE, SLEEP, slots=SLOTS, hostname=host)
        for kernel, host in zip(session.kernels, session.hosts, strict=True)
    ]
    containers = await asyncio.gather(*(backend.start(s) for s in specs))

    (network,) = await _session_networks(docker, machine, session)
    shown = await (await docker.networks.get(network)).show()
    assert {c["Name"] for c in shown["Containers"].values()} == {f"jy-{k}" for k in session.kernels}
    await asyncio.gather(*(backend.remove(c) for c in containers))
    assert await _session_networks(docker, machine, session) == []


async def _no(listing: Awaitable[list[str]]) -> bool:
    return not await listing


async def _is(value: Awaitable[object], expected: object) -> bool:
    return await value == expected
