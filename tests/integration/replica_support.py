"""Scheduler replicas on a server of their own, with simulated node agents: what the replica
and preemption tests share. Writes what the schedulers and agents it starts write."""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from collections.abc import AsyncIterator, Callable
from decimal import Decimal

from nats.js.errors import NotFoundError

from events.bus import Bus, connect
from schemas.ids import node_id_for_host
from schemas.resources import ResourceSlots
from schemas.settings import NatsSettings
from schemas.subjects import COMMANDS_STREAM
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings
from services.scheduler.service import Scheduler, nodes_durable
from services.scheduler.settings import SchedulerSettings

GIB = 1 << 30
IMAGE = "jetyard-sim:replicas"


def slots(cpu: int, mem: int, gpu: int = 0) -> ResourceSlots:
    return ResourceSlots(cpu_milli=cpu * 1000, memory_bytes=mem * GIB, gpu_hundredths=gpu * 100)


@contextlib.asynccontextmanager
async def agents(
    settings: NatsSettings, count: int, *, prefix: str = "replica-node"
) -> AsyncIterator[None]:
    """``count`` simulated machines (16 CPUs, 64 GiB, 4 GPUs each) on one connection."""
    bus = await connect(settings, name="replicas-agents")
    stop = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []
    for i in range(count):
        machine = AgentSettings(
            hostname=f"{prefix}-{i:03d}", backend="simulated", cpu=Decimal(16),
            memory_bytes=64 * GIB, simulated_gpus=4, simulated_images=(IMAGE,),
        )  # fmt: skip
        backend = SimulatedBackend(node_id_for_host(machine.hostname), [IMAGE])
        agent = NodeAgent(bus, machine, backend)
        tasks.append(asyncio.create_task(agent.run(stop), name=f"agent-{i}"))
    try:
        yield
    finally:
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await bus.close()
        failed = [r for r in results if isinstance(r, BaseException)]
        first = "".join(traceback.format_exception(failed[0])) if failed else ""
        assert not failed, f"{len(failed)} agents failed, the first:\n{first}"


@contextlib.asynccontextmanager
async def replicas(settings: NatsSettings, leases: bool) -> AsyncIterator[list[Scheduler]]:
    """Two schedulers, each on its own connection, sharing the durable consumer of
    ``cmd.session.*`` (a work queue: each command goes to one of them)."""
    config = SchedulerSettings(
        durable="scheduler-replicas", leases=leases, poll_timeout_s=0.25,
        command_fetch_timeout_s=0.2,
    )  # fmt: skip
    buses: list[Bus] = []
    started: list[Scheduler] = []
    try:
        for i in range(2):
            buses.append(bus := await connect(settings, name=f"replica-{i}"))
            started.append(scheduler := Scheduler(bus, config))
            await scheduler.start()
        yield started
    finally:
        for scheduler in started:
            await scheduler.stop()
        if buses:
            for durable in (config.durable, nodes_durable(config.durable)):
                with contextlib.suppress(NotFoundError):
                    await buses[0].js.delete_consumer(COMMANDS_STREAM, durable)
        for bus in buses:
            await bus.close()


async def until(what: str, timeout: float, check: Callable[[], bool]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"not true after {timeout}s: {what}")
        await asyncio.sleep(0.05)
