"""Batch sessions and cluster lifecycles through the real scheduler on a real nats-server:
dependencies, start times and timeouts wake the scheduler by themselves (no polling), and a
cluster session ends with its main kernel, stopping the others."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from commands.bus import CommandBus
from commands.node.aggregate import Node
from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus
from events.store import EventStore
from schemas.ids import session_id_for
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus, SessionType
from schemas.tenancy import KeypairPolicyLimits, SessionOwner
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    create,
    eventually,
    node_of,
    now,
    reason_of,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy

NEED = ResourceSlots(cpu_milli=500, memory_bytes=64 << 20)


@pytest.fixture
async def owner(store: EventStore) -> SessionOwner:
    limits = KeypairPolicyLimits(max_containers_per_session=4)
    return (await make_tenancy(store, limits=limits)).owner


@pytest.fixture
async def agent(store: EventStore, image: str, start_scheduler: StartScheduler) -> FakeAgent:
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await agent.register()
    await node_of(store, agent)
    return agent


async def batch(bus: Bus, image: str, owner: SessionOwner, **fields: Any) -> str:
    cmd = create(image, NEED, owner, type=SessionType.BATCH, **fields)
    outcome = await CommandBus(bus).execute(cmd, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    return session_id_for(cmd.command_id)


async def run_to_exit(store: EventStore, agent: FakeAgent, session_id: str, code: int) -> None:
    session = await session_in(store, session_id, SessionStatus.SCHEDULED)
    (kernel_id,) = session.kernel_ids
    await agent.started(kernel_id, session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    await agent.exited(kernel_id, code)
    await session_in(store, session_id, SessionStatus.TERMINATED)


async def test_a_dependent_waits_until_its_dependency_succeeds(
    bus: Bus, store: EventStore, image: str, owner: SessionOwner, agent: FakeAgent
) -> None:
    first = await batch(bus, image, owner)
    then = await batch(bus, image, owner, depends_on=(first,))
    reason = await reason_of(store, then, "waiting for session")
    assert first[:8] in reason
    await run_to_exit(store, agent, first, 0)
    done = await session_in(store, first, SessionStatus.TERMINATED)
    assert (done.exit_code, done.result) == (0, "success")
    await session_in(store, then, SessionStatus.SCHEDULED)


async def test_a_dependent_is_cancelled_when_its_dependency_fails(
    bus: Bus, store: EventStore, image: str, owner: SessionOwner, agent: FakeAgent
) -> None:
    first = await batch(bus, image, owner)
    then = await batch(bus, image, owner, depends_on=(first,))
    await reason_of(store, then, "waiting for session")
    await run_to_exit(store, agent, first, 3)
    failed = await session_in(store, first, SessionStatus.TERMINATED)
    assert (failed.exit_code, failed.result) == (3, "failure")
    cancelled = await session_in(store, then, SessionStatus.CANCELLED)
    assert "exit code 3" in cancelled.reason


async def test_a_start_time_wakes_the_scheduler_by_itself(
    bus: Bus, store: EventStore, image: str, owner: SessionOwner, agent: FakeAgent
) -> None:
    at = now() + timedelta(seconds=1.5)
    later = await batch(bus, image, owner, starts_at=at)
    assert "starts at" in await reason_of(store, later, "starts at")
    scheduled = await session_in(store, later, SessionStatus.SCHEDULED)
    assert scheduled.history[-1].at >= at


async def test_a_batch_session_past_its_timeout_is_stopped(
    bus: Bus, store: EventStore, image: str, owner: SessionOwner, agent: FakeAgent
) -> None:
    session_id = await batch(bus, image, owner, timeout_s=1)
    session = await session_in(store, session_id, SessionStatus.SCHEDULED)
    (kernel_id,) = session.kernel_ids
    await agent.started(kernel_id, session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    stopping = await session_in(store, session_id, SessionStatus.TERMINATING)
    assert "timed out after 1s" in stopping.reason
    node = (await load(store, Node, agent.id)).aggregate
    assert node is not None and node.allocations[kernel_id].stopping
    await agent.exited(kernel_id, 143)
    await session_in(store, session_id, SessionStatus.TERMINATED)


async def test_a_cluster_session_ends_with_its_main_kernel_and_stops_the_others(
    bus: Bus, store: EventStore, image: str, owner: SessionOwner, agent: FakeAgent
) -> None:
    cmd = create(image, NEED, owner, kernels=3, type=SessionType.BATCH)
    outcome = await CommandBus(bus).execute(cmd, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    session_id = session_id_for(cmd.command_id)
    session = await session_in(store, session_id, SessionStatus.SCHEDULED)
    main, *subs = session.kernel_ids
    for kernel_id in session.kernel_ids[:2]:
        await agent.started(kernel_id, session_id)
    # Not every kernel runs yet: the session is not RUNNING.
    assert (await load(store, Session, session_id)).aggregate.status is SessionStatus.SCHEDULED  # type: ignore[union-attr]
    await agent.started(subs[1], session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    # A sub-kernel ending first ends nothing.
    await agent.exited(subs[0], 1)
    await agent.exited(main, 0)
    await session_in(store, session_id, SessionStatus.TERMINATING)

    async def stop_asked() -> bool:
        node = (await load(store, Node, agent.id)).aggregate
        return node is not None and node.allocations[subs[1]].stopping

    await eventually(stop_asked)
    await agent.exited(subs[1], 137)
    ended = await session_in(store, session_id, SessionStatus.TERMINATED)
    assert ended.exit_code == 0 and ended.result == "success"
    node = (await load(store, Node, agent.id)).aggregate
    assert node is not None and not node.allocations
