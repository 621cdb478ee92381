"""The node agent on the real nats-server with the simulated backend: registration and epochs,
allocations started and stopped from its ledger, exits and failures reported once, heartbeats,
re-attaching after a crash, fencing released work, and the devices, host name, CPU pinning and
MPS settings an allocation's container is given."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats.errors
import pytest

from commands.agent import Agent
from commands.node.aggregate import Node
from commands.repository import load
from events.bus import Bus
from events.store import EventStore
from schemas.devices import DeviceShare
from schemas.ids import new_id, node_id_for_host
from schemas.subjects import EVENTS_STREAM, HEARTBEATS_BUCKET
from services.node.agent import NodeAgent
from services.node.backend import Container
from services.node.backend_simulated import SimulatedBackend
from services.node.heartbeat import Heartbeat, heartbeat_key
from services.node.logs import read_kernel_logs
from services.node.record import AgentSupersededError
from services.node.settings import AgentSettings
from services.node.topology import format_cpulist
from tests.integration.leftovers import consumer_names, running_tasks, tasks_left
from tests.integration.node_support import (
    allocate,
    change_ledger,
    eventually,
    facts,
    facts_about,
    release,
    stop,
)
from tests.support import NOW

IMAGE = "python:3.12"
MPS = Path("/run/jetyard-mps")


def machine(gpus: int = 0, mps: Path | None = None) -> tuple[AgentSettings, SimulatedBackend]:
    """A fresh simulated machine: unique host name (the server is shared), its backend."""
    settings = AgentSettings(
        hostname=f"sim-{new_id()}",
        backend="simulated",
        simulated_images=(IMAGE,),
        simulated_gpus=gpus,
        mps_pipe_dir=mps,
    )
    backend = SimulatedBackend(node_id_for_host(settings.hostname), [IMAGE], mps_pipe_dir=mps)
    return settings, backend


@asynccontextmanager
async def running(
    bus: Bus, settings: AgentSettings, backend: SimulatedBackend
) -> AsyncIterator[NodeAgent]:
    """An agent working until the block ends (a clean stop)."""
    agent = NodeAgent(bus, settings, backend)
    stopping = asyncio.Event()
    task = asyncio.create_task(agent.run(stopping))

    async def registered() -> int:
        if task.done():
            task.result()
        return agent.record.epoch

    await eventually(registered, what="registration")
    try:
        yield agent
    finally:
        stopping.set()
        await task


async def crash(task: asyncio.Task[None]) -> None:
    """End an agent abruptly, as SIGKILL would: it gets no chance to stop anything."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def running_kernel(store: EventStore, node_id: str, kernel_id: str) -> str | None:
    agent = (await load(store, Agent, node_id)).aggregate
    known = agent.running.get(kernel_id) if agent is not None else None
    return known.container_id if known is not None else None


async def exit_of(store: EventStore, node_id: str, kernel_id: str) -> dict[str, Any] | None:
    for name, payload in await facts(store, node_id):
        if name == "KernelExited" and payload["kernel_id"] == kernel_id:
            return payload
    return None


async def test_registers_with_epoch_1_then_2_after_a_restart_and_beats(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id = node_id_for_host(settings.hostname)

    async with running(bus, settings, backend):
        kv = await bus.js.key_value(HEARTBEATS_BUCKET)
        beat = json.loads((await kv.get(heartbeat_key(node_id))).value or b"{}")
    async with running(bus, settings, backend):
        pass

    registered = [p for name, p in await facts(store, node_id) if name == "AgentRegistered"]
    assert [(p["epoch"], p["backend"], p["hostname"]) for p in registered] == [
        (1, "simulated", settings.hostname),
        (2, "simulated", settings.hostname),
    ]
    assert registered[0]["images"] == [IMAGE]
    assert registered[0]["capacity"]["cpu_milli"] > 0
    assert (beat["agent_id"], beat["epoch"]) == (node_id, 1)


class FlakyStartAgent(NodeAgent):
    """An agent whose first heartbeat after registering gets no answer, as while the log's
    leader is being elected."""

    failed = False

    async def start(self) -> Heartbeat:
        heartbeat = await super().start()
        if not self.failed:
            self.failed = True
            raise nats.errors.TimeoutError
        return heartbeat


async def test_a_start_cut_off_by_an_outage_is_tried_again_and_the_agent_works(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id, kernel = node_id_for_host(settings.hostname), new_id()
    agent = FlakyStartAgent(bus, settings, backend)
    stopping = asyncio.Event()
    task = asyncio.create_task(agent.run(stopping))
    try:
        await change_ledger(store, node_id, allocate(kernel, image=IMAGE))
        await eventually(lambda: running_kernel(store, node_id, kernel), what="the kernel")
    finally:
        stopping.set()
        await task  # it ran on after the failed start: no error

    registered = [
        p["epoch"] for name, p in await facts(store, node_id) if name == "AgentRegistered"
    ]
    assert agent.failed and registered == [1, 2]  # the cut-off start's epoch is superseded


async def test_an_allocation_runs_until_a_stop_request_ends_it(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id, kernel = node_id_for_host(settings.hostname), new_id()

    async with running(bus, settings, backend):
        await change_ledger(store, node_id, allocate(kernel, image=IMAGE))
        container_id = await eventually(lambda: running_kernel(store, node_id, kernel))
        assert [c.container_id for c in await backend.containers()] == [container_id]

        await change_ledger(store, node_id, stop(kernel))
        ended = await eventually(lambda: exit_of(store, node_id, kernel))

    assert (ended["exit_code"], ended["reason"]) == (143, "stopped on request")
    assert await backend.containers() == []  # removed once the exit was on the log
    assert await facts_about(store, node_id, kernel) == ["KernelStarted", "KernelExited"]
    assert "exited with code 143" in (await read_kernel_logs(bus, kernel) or "")


async def test_an_exit_is_reported_with_its_code_and_a_bad_image_as_a_failure(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id, exits, bad = node_id_for_host(settings.hostname), new_id(), new_id()

    async with running(bus, settings, backend):
        await change_ledger(store, node_id, allocate(exits, image=IMAGE, command=("exit", "3")))
        await change_ledger(store, node_id, allocate(bad, image="no-such:image"))
        ended = await eventually(lambda: exit_of(store, node_id, exits))
        failed = await eventually(lambda: facts_about(store, node_id, bad))

    assert ended["exit_code"] == 3
    assert await facts_about(store, node_id, exits) == ["KernelStarted", "KernelExited"]
    assert failed == ["KernelFailedToStart"]
    reason = next(p["reason"] for n, p in await facts(store, node_id) if n == "KernelFailedToStart")
    assert "no-such:image" in reason


async def test_stopped_before_it_started_ends_with_exit_code_minus_1(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id, kernel = node_id_for_host(settings.hostname), new_id()
    # Allocated and stopped while the agent was not running: nothing ever ran.
    await change_ledger(
        store, node_id, lambda n: (allocate(kernel, image=IMAGE)(n), stop(kernel)(n))
    )

    async with running(bus, settings, backend):
        ended = await eventually(lambda: exit_of(store, node_id, kernel))
    async with running(bus, settings, backend):
        pass  # a restart reports nothing again

    assert (ended["exit_code"], ended["reason"]) == (-1, "stopped before it started")
    assert await facts_about(store, node_id, kernel) == ["KernelExited"]
    assert await backend.containers() == []


async def test_a_crashed_agent_is_replaced_by_one_that_re_attaches_and_reports_exits(
    bus: Bus,
) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id, stays, dies = node_id_for_host(settings.hostname), new_id(), new_id()
    first = NodeAgent(bus, settings, backend)
    task = asyncio.create_task(first.run(asyncio.Event()))
    await change_ledger(store, node_id, allocate(stays, image=IMAGE))
    await change_ledger(store, node_id, allocate(dies, image=IMAGE))
    before = await eventually(lambda: running_kernel(store, node_id, stays))
    await eventually(lambda: running_kernel(store, node_id, dies))

    await crash(task)
    backend.exit_kernel(dies, 7)  # ends while no agent watches

    async with running(bus, settings, backend) as second:
        ended = await eventually(lambda: exit_of(store, node_id, dies))
        assert second.record.epoch == 2

    assert (ended["exit_code"], ended["reason"]) == (7, "exited")
    assert await running_kernel(store, node_id, stays) == before
    assert await facts_about(store, node_id, stays) == ["KernelStarted"]  # not started twice
    assert [c.kernel_id for c in await backend.containers()] == [stays]


async def test_work_released_while_the_agent_was_away_is_stopped_on_its_return(bus: Bus) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id, kernel = node_id_for_host(settings.hostname), new_id()
    async with running(bus, settings, backend):
        await change_ledger(store, node_id, allocate(kernel, image=IMAGE))
        await eventually(lambda: running_kernel(store, node_id, kernel))

    # The scheduler declared the node lost and released its allocation meanwhile.
    await change_ledger(store, node_id, release(kernel))
    async with running(bus, settings, backend):
        ended = await eventually(lambda: exit_of(store, node_id, kernel))

    assert ended["reason"] == "stopped: its allocation was released"
    assert await backend.containers() == []


async def test_an_agent_stops_when_a_newer_incarnation_registers(bus: Bus) -> None:
    settings, backend = machine()
    older = NodeAgent(bus, settings, backend)
    task = asyncio.create_task(older.run(asyncio.Event()))
    await eventually(lambda: _registered(older), what="the older agent's registration")

    async with running(bus, settings, SimulatedBackend(older.node_id, [IMAGE])) as newer:
        with pytest.raises(AgentSupersededError, match="epoch 2 registered after"):
            await asyncio.wait_for(task, timeout=10)
        assert newer.record.epoch == 2


async def _registered(agent: NodeAgent) -> int:
    return agent.record.epoch


async def test_an_allocation_runs_on_exactly_its_devices_pinned_to_their_numa_node(
    bus: Bus,
) -> None:
    store = EventStore(bus)
    settings, backend = machine(gpus=8, mps=MPS)
    node_id, main, sub = node_id_for_host(settings.hostname), new_id(), new_id()

    async with running(bus, settings, backend) as agent:
        hardware = agent.capacity
        gpus = hardware.devices

        def held(index: int, hundredths: int = 100) -> DeviceShare:
            d = gpus[index]
            return DeviceShare(index=d.index, uuid=d.uuid, hundredths=hundredths,
                               whole=hundredths == 100)  # fmt: skip

        def register() -> Node:
            # As the scheduler does from the agent's registration.
            return Node.register(
                node_id, settings.hostname, "default",
                hardware.slots.model_copy(update={"memory_bytes": 1 << 40}), NOW,
                devices=gpus, numa=hardware.numa,
            )  # fmt: skip

        cluster = {"JETYARD_CLUSTER_ROLE": "main", "JETYARD_CLUSTER_HOSTS": "main1,sub1"}
        await change_ledger(
            store,
            node_id,
            allocate(main, image=IMAGE, devices=(held(4), held(5)), hostname="main1",
                     numa_node=1, env=cluster),
            register=register,
        )  # fmt: skip
        await change_ledger(
            store, node_id, allocate(sub, image=IMAGE, devices=(held(0, 30),), numa_node=0)
        )
        await eventually(lambda: running_kernel(store, node_id, main))
        await eventually(lambda: running_kernel(store, node_id, sub))
        whole, shared = backend.launch_of(main), backend.launch_of(sub)

    assert whole is not None and shared is not None
    assert [d.numa_node for d in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    host = whole.config["HostConfig"]
    assert host["DeviceRequests"][0]["DeviceIDs"] == [gpus[4].uuid, gpus[5].uuid]
    assert host["CpusetCpus"] == format_cpulist(hardware.numa[1].cpus)
    assert whole.config["Hostname"] == "main1"
    assert whole.env["CUDA_VISIBLE_DEVICES"] == f"{gpus[4].uuid},{gpus[5].uuid}"
    assert whole.env["JETYARD_CLUSTER_HOSTS"] == "main1,sub1"
    assert "CUDA_MPS_PIPE_DIRECTORY" not in whole.env
    # The share runs as an MPS client limited to 30% of its device (80 GiB -> 24 GiB).
    assert shared.config["HostConfig"]["CpusetCpus"] == format_cpulist(hardware.numa[0].cpus)
    assert shared.env["CUDA_MPS_PIPE_DIRECTORY"] == str(MPS)
    assert shared.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert shared.env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=24576M"
    registered = next(p for n, p in await facts(store, node_id) if n == "AgentRegistered")
    assert [n["node"] for n in registered["numa"]] == [0, 1]
    assert [d["numa_node"] for d in registered["devices"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert registered["capacity"]["gpu_hundredths"] == 800


class EngineGone(SimulatedBackend):
    """A machine whose container engine stops answering once the agent has read its ledger."""

    async def containers(self) -> list[Container]:
        raise OSError("the container engine does not answer")


async def test_a_start_that_fails_half_way_leaves_nothing_running(bus: Bus) -> None:
    settings, _ = machine()
    backend = EngineGone(node_id_for_host(settings.hostname), [IMAGE])
    readers, tasks = await consumer_names(bus, EVENTS_STREAM), running_tasks()
    with pytest.raises(OSError, match="does not answer"):
        await NodeAgent(bus, settings, backend).run(asyncio.Event())
    assert await tasks_left(tasks) == []
    assert await consumer_names(bus, EVENTS_STREAM) <= readers  # its ledger's reader is gone
