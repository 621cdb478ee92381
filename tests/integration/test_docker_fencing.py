"""Fencing on the real Docker engine, with the real scheduler: an agent killed while its kernel
runs (the container keeps running, as after kill -9) has its node declared lost once its
heartbeat expires, and the session ends ``node-lost``. Started again as the same node, it
stops and removes that container (its output kept, its exit reported, which the ended session
ignores) before it registers under a new epoch; new work placed on the node then runs.

Runs its own nats-server: the heartbeat bucket's TTL (3x the interval) is short here, and the
shared server's bucket is made for the default interval. Docker is required (never skipped).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from commands.bus import CommandBus
from commands.messages import CreateSession
from commands.node.aggregate import Node
from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus, connect, ensure_streams
from events.store import EventStore
from events.writes import AggregateRef
from jetyard.runtime.natsserver import NatsServer
from schemas.ids import new_id, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionStatus
from schemas.settings import NatsSettings
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.node.backend import LABEL_CLUSTER, LABEL_NODE
from services.node.identity import resolve_node_id
from services.node.logs import read_kernel_logs
from services.node.settings import AgentSettings
from services.scheduler.service import Scheduler
from services.scheduler.settings import SchedulerSettings
from tests.integration.docker_support import (
    IMAGE,
    gone,
    kill,
    open_docker,
    remove_containers,
    running,
    start_agent,
    started,
)
from tests.integration.node_support import eventually
from tests.tenancy_support import make_tenancy

HEARTBEAT_S = 2.0  # the bucket's TTL is 6 s: a loaded machine never misses three beats
SLOW = 60.0  # waits that include Docker, a heartbeat's expiry or a scheduler pass
NEED = ResourceSlots.of(cpu="0.5", memory=64 << 20)
SAYS = "echo kernel up; exec sleep 600"


@pytest.fixture
async def docker() -> AsyncIterator[aiodocker.Docker]:
    client = await open_docker()
    yield client
    await client.close()


@pytest.fixture
async def own_nats(tmp_path: Path) -> AsyncIterator[NatsSettings]:
    """A nats-server of this test alone, its streams and buckets declared for a short
    heartbeat interval."""
    server = NatsServer(data_dir=tmp_path / "nats").start()
    try:
        settings = NatsSettings(
            url=server.url, request_timeout_s=10.0, heartbeat_interval_s=HEARTBEAT_S
        )
        bus = await connect(settings, name="fencing-setup")
        await ensure_streams(bus)
        await bus.close()
        yield settings
    finally:
        server.stop()


@pytest.fixture
async def own_bus(own_nats: NatsSettings) -> AsyncIterator[Bus]:
    connected = await connect(own_nats, name="fencing-tests")
    yield connected
    await connected.close()


@pytest.fixture
async def scheduler(own_bus: Bus) -> AsyncIterator[Scheduler]:
    settings = SchedulerSettings(
        durable="fencing", poll_timeout_s=0.25, command_fetch_timeout_s=0.2
    )  # watches heartbeats, as in production
    started = Scheduler(own_bus, settings)
    await started.start()
    yield started
    await started.stop()


@pytest.fixture
async def machine(docker: aiodocker.Docker, tmp_path: Path) -> AsyncIterator[AgentSettings]:
    settings = AgentSettings(
        hostname=f"fence-{new_id()[:8]}", cluster_id=f"c{new_id()[:8]}", backend="docker",
        stop_timeout_s=2, data_dir=tmp_path / "agent",
    )  # fmt: skip
    yield settings
    await remove_containers(docker, resolve_node_id(settings), settings.cluster_id)


async def test_a_node_lost_while_its_kernel_runs_fences_it_before_registering_again(
    own_bus: Bus,
    own_nats: NatsSettings,
    docker: aiodocker.Docker,
    scheduler: Scheduler,
    machine: AgentSettings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    bus, nats = own_bus, own_nats
    store, owner = EventStore(bus), (await make_tenancy(EventStore(bus))).owner
    node_id = resolve_node_id(machine)
    task, _ = start_agent(machine, nats)
    try:
        await eventually(lambda: _node(store, node_id, lost=False), timeout=SLOW, what="node")
        first = await _create(bus, owner)
        placed = await _session(store, first, SessionStatus.RUNNING)
        (kernel,) = placed.kernel_ids
        container_id = await eventually(lambda: started(store, node_id, kernel), timeout=SLOW)
    finally:
        await kill(task)  # as kill -9: the container is left running

    ended = await _session(store, first, SessionStatus.TERMINATED)
    assert ended.reason.startswith("node-lost") and machine.hostname in ended.reason
    assert await running(docker, container_id)  # nobody has stopped it yet: the agent is dead
    lost_at = time.time()

    task, stopping = start_agent(machine, nats)
    try:
        await eventually(lambda: _registered(store, node_id, 2), timeout=SLOW, what="epoch 2")
        # Removed before the new registration was written (not merely by a later pass).
        assert await gone(docker, container_id)
        await eventually(lambda: _node(store, node_id, lost=False), timeout=SLOW, what="back")
        second = await _create(bus, owner)
        again = await _session(store, second, SessionStatus.RUNNING)
        (later,) = again.kernel_ids
        assert again.placements == {later: node_id}
        later_id = await eventually(lambda: started(store, node_id, later), timeout=SLOW)
        assert await running(docker, later_id)
        labels = (await (await docker.containers.get(later_id)).show())["Config"]["Labels"]
        assert (labels[LABEL_CLUSTER], labels[LABEL_NODE]) == (machine.cluster_id, node_id)
        await scheduler.settle()
        assert not task.done()  # the agent works on, and failed no pass meanwhile
    finally:
        stopping.set()
        await task

    # On the agent's log, the fenced kernel's end comes before the registration that follows.
    history = [e.envelope for e in (await store.read(_agent(node_id))).events]
    names = [(e.name, e.payload.get("kernel_id"), e.payload.get("epoch")) for e in history]
    exited = names.index(("KernelExited", kernel, None))
    registered = names.index(("AgentRegistered", None, 2))
    assert exited < registered
    assert names.count(("KernelExited", kernel, None)) == 1
    fenced = history[exited].payload
    assert (fenced["exit_code"], fenced["reason"]) == (143, "stopped: its allocation was released")
    # The engine agrees: the container died and was destroyed before the agent registered.
    engine = await _container_events(docker, container_id, since=lost_at)
    assert engine["die"] < engine["destroy"] < history[registered].occurred_at
    assert await read_kernel_logs(bus, kernel) == "kernel up\n"  # its output was kept
    # The exit changed nothing for the session the scheduler had already ended.
    final = (await load(store, Session, first)).aggregate
    assert final is not None and (final.status, final.reason) == (ended.status, ended.reason)
    failures = [r for r in caplog.records if r.name.startswith("services.node")]
    assert [r.getMessage() for r in failures if r.levelno >= logging.ERROR] == []


async def _create(bus: Bus, owner: SessionOwner) -> str:
    spec = SessionSpec(
        image=IMAGE, kernels=(KernelSpec(resources=NEED),), command=("sh", "-c", SAYS)
    )
    cmd = CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec, owner=owner)
    outcome = await CommandBus(bus).execute(cmd, timeout=SLOW)
    assert outcome is not None and outcome.accepted, outcome
    return session_id_for(cmd.command_id)


async def _session(store: EventStore, session_id: str, status: SessionStatus) -> Session:
    async def check() -> Session | None:
        session = (await load(store, Session, session_id)).aggregate
        return session if session is not None and session.status is status else None

    return await eventually(check, timeout=SLOW, what=f"session {status}")


async def _node(store: EventStore, node_id: str, *, lost: bool) -> Node | None:
    node = (await load(store, Node, node_id)).aggregate
    return node if node is not None and node.lost is lost else None


def _agent(node_id: str) -> AggregateRef:
    return AggregateRef(AggregateType.AGENT, node_id)


async def _registered(store: EventStore, node_id: str, epoch: int) -> bool:
    history = (await store.read(_agent(node_id))).events
    return any(
        e.name == "AgentRegistered" and e.envelope.payload["epoch"] == epoch for e in history
    )


async def _container_events(
    docker: aiodocker.Docker, container_id: str, *, since: float
) -> dict[str, datetime]:
    """When the engine says the container died and was destroyed (read back from ``since``)."""
    filters = json.dumps({"type": ["container"], "container": [container_id]})
    # aiodocker's events API has no annotations (hence the ignores).
    subscriber = docker.events.subscribe(filters=filters, since=str(int(since) - 1))  # type: ignore[no-untyped-call]
    seen: dict[str, datetime] = {}
    try:
        while "destroy" not in seen:
            event: dict[str, Any] | None = await asyncio.wait_for(subscriber.get(), timeout=SLOW)
            assert event is not None, f"the engine's events ended before: {seen}"
            at = datetime.fromtimestamp(int(event["timeNano"]) / 1e9, tz=UTC)
            seen.setdefault(str(event["Action"]), at)
    finally:
        await docker.events.stop()  # type: ignore[no-untyped-call]
    return seen
