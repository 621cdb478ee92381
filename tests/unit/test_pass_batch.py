"""Batch sessions in the decision pass, in memory: timeouts, dependencies and start times
(``lifecycle.stop_timed_out`` and ``hold_back``)."""

from __future__ import annotations

from datetime import timedelta

from events.domain.node import KernelStopRequested
from events.domain.quota import QuotaSessionDequeued
from events.domain.session import (
    SessionAdmitted,
    SessionCancelled,
    SessionPendingReasonChanged,
    SessionScheduled,
    SessionTerminating,
)
from schemas.session import SessionStatus, SessionType
from schemas.tenancy import ScopeKind, quota_id_for
from services.scheduler.steps.lifecycle import hold_back
from services.scheduler.workspace import Workspace
from tests.unit.pass_support import World, slots
from tests.unit.scenario import T0

BATCH = SessionType.BATCH


async def test_a_batch_session_past_its_timeout_is_stopped() -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1")
    session_id = await world.create(slots(gpu=1), type=BATCH, timeout_s=60)
    await world.decide()
    await world.started(session_id)
    await world.decide()
    assert world.state.due() == T0 + timedelta(seconds=60)
    world.clock.advance(59)
    assert await world.decide() == 0
    world.clock.advance(1)
    mark = world.last_seq()

    await world.decide()

    ((stopped, terminating),) = world.stored(SessionTerminating, after=mark)
    assert stopped == session_id and terminating.reason == "timed out after 60s"
    kernel = world.state.sessions[session_id].session.main_kernel
    ((ledger, stop),) = world.stored(KernelStopRequested, after=mark)
    assert (ledger, stop.kernel_id) == (node_id, kernel)
    assert world.state.sessions[session_id].session.status is SessionStatus.TERMINATING
    assert world.state.nodes[node_id].allocations[kernel].stopping


async def test_a_dependency_that_failed_cancels_the_waiting_session() -> None:
    world = World()
    owner = await world.tenancy()
    await world.register("gpu-1")
    first = await world.create(slots(gpu=1), type=BATCH)
    second = await world.create(slots(gpu=1), type=BATCH, depends_on=(first,))
    await world.decide()
    ((waiting, noted),) = world.stored(SessionPendingReasonChanged)
    assert waiting == second and noted.reason == f"waiting for session {first[:8]} to succeed"
    await world.started(first)
    await world.decide()
    await world.exited(first, 1)
    mark = world.last_seq()

    await world.decide()

    ((cancelled_id, cancelled),) = world.stored(SessionCancelled, after=mark)
    assert cancelled_id == second
    assert cancelled.reason == f"dependency {first[:8]} failed with exit code 1"
    ((queue, dequeued),) = world.stored(QuotaSessionDequeued, after=mark)
    assert queue == quota_id_for(ScopeKind.KEYPAIR, owner.access_key)
    assert set(dequeued.sessions) == {second}
    assert second not in [sid for sid, _ in world.stored(SessionAdmitted)]
    assert world.state.sessions[second].session.status is SessionStatus.CANCELLED


async def test_a_dependency_that_succeeded_lets_the_waiting_session_run() -> None:
    world = World()
    owner = await world.tenancy()
    await world.register("gpu-1")
    first = await world.create(slots(gpu=1), type=BATCH)
    second = await world.create(slots(gpu=1), type=BATCH, depends_on=(first,))
    await world.decide()
    await world.started(first)
    await world.decide()
    await world.exited(first, 0)
    mark = world.last_seq()

    await world.decide()

    # Held back until now, then admitted and placed by one pass (its placement admits it).
    assert world.stored(SessionAdmitted, after=mark) == []
    assert [sid for sid, _ in world.stored(SessionScheduled, after=mark)] == [second]
    keypair = quota_id_for(ScopeKind.KEYPAIR, owner.access_key)
    assert second in world.state.quotas[keypair].reserved


async def test_a_start_time_holds_a_session_back_until_it_comes() -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-1")
    await world.decide()
    starts_at = T0 + timedelta(minutes=2)
    session_id = await world.create(slots(gpu=1), type=BATCH, starts_at=starts_at)

    space = Workspace(world.state)
    assert hold_back(world.state, space, world.clock()) == {session_id}
    assert world.state.next_wake == starts_at
    noted = [
        e.payload["reason"] for batch in space.batches for envs in batch.values() for e in envs
    ]
    assert noted == [f"starts at {starts_at.isoformat()}"]

    await world.decide()
    assert world.stored(SessionAdmitted) == []
    world.clock.now = starts_at
    await world.decide()
    assert [sid for sid, _ in world.stored(SessionScheduled)] == [session_id]
