"""Requeue on node loss, in memory: a batch session that asked for it waits again with new
kernels when its node is lost, keeps its quota, is placed on a live node; after the last
requeue allowed, the next loss ends it; sessions that did not ask end ``node-lost``."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from events.domain.quota import QuotaReleased
from events.domain.session import SessionRequeued
from schemas.session import MAX_REQUEUES, KernelSpec, SessionSpec, SessionStatus, SessionType
from tests.unit.pass_support import IMAGE, World, slots

S = SessionStatus
BATCH = {"type": SessionType.BATCH, "command": ("sleep", "60"), "requeue_on_node_loss": True}


async def lose(world: World, node_id: str) -> None:
    world.state.gone[node_id] = None  # its heartbeat expired
    await world.decide()


async def test_a_requeued_batch_session_runs_again_on_a_live_node() -> None:
    world = World()
    owner = await world.tenancy()
    first = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    session_id = await world.create(slots(gpu=1), **BATCH)
    await world.decide()
    session = world.state.sessions[session_id].session
    old_kernels = session.kernel_ids
    assert session.placements == {old_kernels[0]: first}
    await world.started(session_id)
    await world.decide()
    second = await world.register("gpu-2", slots(cpu=8, mem=32, gpu=1))
    await world.decide()
    mark = world.last_seq()

    await lose(world, first)

    ((_, requeued),) = world.stored(SessionRequeued, after=mark)
    assert requeued.attempt == 1 and requeued.kernel_ids != old_kernels
    assert requeued.reason.startswith("node-lost: node gpu-1 stopped answering")
    assert "last known: running" in requeued.reason and "requeue 1 of 3" in requeued.reason
    assert world.stored(QuotaReleased, after=mark) == []  # its slots stay reserved
    assert world.state.due() is not None  # a pass is asked for at once

    await world.decide()
    placed = world.state.sessions[session_id].session
    assert placed.status is S.SCHEDULED
    assert placed.placements == {requeued.kernel_ids[0]: second}
    assert session_id in world.state.holdings and owner is not None
    statuses = [h.status for h in placed.history]
    assert statuses[-3:] == [S.RUNNING, S.PENDING, S.SCHEDULED]


async def test_after_the_last_requeue_the_next_loss_ends_it() -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-0", slots(cpu=8, mem=32, gpu=1))
    session_id = await world.create(slots(gpu=1), **BATCH)
    for i in range(MAX_REQUEUES + 1):
        if i:
            node_id = await world.register(f"gpu-{i}", slots(cpu=8, mem=32, gpu=1))
        await world.decide()
        session = world.state.sessions[session_id].session
        assert session.placements == {session.kernel_ids[0]: node_id}, i
        await lose(world, node_id)
    ended = world.state.sessions[session_id].session
    assert ended.status is S.TERMINATED and ended.attempt == MAX_REQUEUES
    assert ended.reason.startswith("node-lost")
    await world.decide()
    assert session_id not in world.state.holdings  # its quota is back


async def test_sessions_that_did_not_ask_end_node_lost() -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    plain = await world.create(slots(cpu=1, mem=1), type=SessionType.BATCH, command=("true",))
    await world.decide()
    mark = world.last_seq()

    await lose(world, node_id)

    assert world.stored(SessionRequeued, after=mark) == []
    assert world.state.sessions[plain].session.status is S.TERMINATED


def test_only_batch_sessions_may_ask_to_be_requeued() -> None:
    with pytest.raises(ValidationError, match="requeue_on_node_loss applies to batch"):
        SessionSpec(
            image=IMAGE, kernels=(KernelSpec(resources=slots()),), requeue_on_node_loss=True
        )
