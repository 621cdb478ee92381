"""Session commands on the folded state, in memory (``SessionCommands``): creates in runs,
the keypair's pending limit, and terminating a waiting or a running session."""

from __future__ import annotations

import pytest

from commands.outcome import Accepted, Code, Rejected
from events.domain.node import KernelStopRequested, ResourcesReleased
from events.domain.quota import QuotaSessionDequeued, QuotaSessionQueued
from events.domain.session import (
    SessionCancelled,
    SessionRequested,
    SessionTerminated,
    SessionTerminating,
)
from schemas.ids import session_id_for
from schemas.session import SessionStatus
from schemas.tenancy import KeypairPolicyLimits, ScopeKind, quota_id_for
from tests.unit.pass_support import World, slots


async def test_the_same_create_twice_in_one_run_makes_one_session() -> None:
    world = World()
    owner = await world.tenancy()
    await world.register("gpu-1")
    cmd = world.request(slots(gpu=1))

    decisions = await world.commands.create_sessions([cmd, cmd], world.ctx)

    assert all(isinstance(d, Accepted) for d in decisions)
    session_id = session_id_for(cmd.command_id)
    assert [sid for sid, _ in world.stored(SessionRequested)] == [session_id]
    ((queue, queued),) = world.stored(QuotaSessionQueued)
    assert queue == quota_id_for(ScopeKind.KEYPAIR, owner.access_key)
    assert set(queued.sessions) == {session_id}


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "not-stored"])
async def test_a_create_whose_answer_was_lost_is_stored_once(stored: bool) -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-1")
    cmd = world.request(slots(gpu=1))
    world.store.fail_next(stored=stored)

    (decision,) = await world.commands.create_sessions([cmd], world.ctx)

    assert isinstance(decision, Accepted)
    session_id = session_id_for(cmd.command_id)
    assert [sid for sid, _ in world.stored(SessionRequested)] == [session_id]
    assert [set(e.sessions) for _, e in world.stored(QuotaSessionQueued)] == [{session_id}]
    assert session_id in world.state.sessions


async def test_a_create_over_the_keypairs_pending_limit_is_refused() -> None:
    world = World()
    await world.tenancy(KeypairPolicyLimits(max_pending_sessions=1))
    await world.register("gpu-1")
    first, second = world.request(slots(gpu=1)), world.request(slots(gpu=1))

    decisions = await world.commands.create_sessions([first, second], world.ctx)

    assert isinstance(decisions[0], Accepted)
    refused = decisions[1]
    assert isinstance(refused, Rejected) and refused.code == Code.QUOTA
    assert "max pending sessions" in refused.message
    assert [sid for sid, _ in world.stored(SessionRequested)] == [session_id_for(first.command_id)]


async def test_a_create_for_an_image_no_agent_has_is_refused() -> None:
    world = World()
    await world.tenancy()

    (decision,) = await world.commands.create_sessions([world.request()], world.ctx)

    assert isinstance(decision, Rejected) and decision.code == Code.INVALID
    assert world.stored(SessionRequested) == []


async def test_terminating_a_waiting_session_cancels_it_and_frees_its_place_at_once() -> None:
    world = World()
    owner = await world.tenancy()
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=0))
    session_id = await world.create(slots(gpu=1))  # no GPU anywhere: it waits
    mark = world.last_seq()

    decision = await world.terminate(session_id)

    assert isinstance(decision, Accepted)
    # Its queue place is given back in the same commit, ahead of the cancel.
    assert world.names(after=mark) == ["QuotaSessionDequeued", "SessionCancelled"]
    assert world.state.sessions[session_id].session.status is SessionStatus.CANCELLED
    await world.decide()
    ((queue, dequeued),) = world.stored(QuotaSessionDequeued, after=mark)
    assert queue == quota_id_for(ScopeKind.KEYPAIR, owner.access_key)
    assert set(dequeued.sessions) == {session_id}


async def test_terminating_a_running_session_asks_its_node_to_stop_the_kernel() -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1")
    session_id = await world.create(slots(gpu=1))
    await world.decide()
    await world.started(session_id)
    await world.decide()
    mark, commits = world.last_seq(), world.store.commits

    decision = await world.terminate(session_id)

    assert isinstance(decision, Accepted)
    assert world.store.commits == commits + 1  # session and ledger in one group commit
    ((_, terminating),) = world.stored(SessionTerminating, after=mark)
    assert terminating.reason == "terminated by service tests-admin"
    kernel = world.state.sessions[session_id].session.main_kernel
    ((ledger, stop),) = world.stored(KernelStopRequested, after=mark)
    assert (ledger, stop.kernel_id) == (node_id, kernel)

    await world.exited(session_id, 137)
    await world.decide()
    ((_, terminated),) = world.stored(SessionTerminated, after=mark)
    assert terminated.exit_code == 137
    assert terminated.reason == "terminated by service tests-admin"  # not the kernel's exit
    assert [n for n, _ in world.stored(ResourcesReleased, after=mark)] == [node_id]


async def test_terminating_twice_or_an_unknown_session_writes_nothing() -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=0))
    session_id = await world.create(slots(gpu=1))
    await world.terminate(session_id)
    mark = world.last_seq()

    again = await world.terminate(session_id)
    unknown = await world.terminate("no-such-session")

    assert isinstance(again, Accepted) and again.message.endswith("is already CANCELLED")
    assert isinstance(unknown, Rejected) and unknown.code == Code.NOT_FOUND
    assert world.names(after=mark) == []
    assert len(world.stored(SessionCancelled)) == 1
