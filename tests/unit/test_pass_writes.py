"""How a decision pass stores what it decided, in memory: another writer got there first (a
conflict), the store's answer was lost (an unknown outcome), or the races never end. In every
case the store ends consistent, and the state equals a fresh fold of it."""

from __future__ import annotations

from collections import Counter

import pytest

from commands.quota import Quota
from commands.session.aggregate import Session
from commands.unit_of_work import TooManyConflictsError
from events.domain.node import ResourcesAllocated
from events.domain.quota import QuotaSessionDequeued
from events.domain.session import (
    SessionAdmitted,
    SessionPendingReasonChanged,
    SessionScheduled,
    SessionTerminated,
)
from schemas.session import SessionStatus
from schemas.tenancy import KeypairPolicyLimits, ScopeKind, quota_id_for
from tests.unit.pass_support import Watched, World, holdings, rival, rival_allocates, slots
from tests.unit.scenario import T0


async def test_a_rival_allocation_on_the_node_is_folded_and_the_pass_decides_again() -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    await world.decide()
    session_id = await world.create(slots(gpu=1))
    await rival_allocates(world.store, node_id, "rival-kernel", gpu=1)  # not folded
    mark, watched = world.last_seq(), Watched(world.store)

    await world.decide(store=watched)

    assert len(watched.handed) == 2  # refused once, then decided again
    assert world.stored(SessionScheduled, after=mark) == []
    assert [e.kernel_id for _, e in world.stored(ResourcesAllocated)] == ["rival-kernel"]
    ((_, noted),) = world.stored(SessionPendingReasonChanged, after=mark)
    assert noted.reason.startswith("no node in group default has 1 free GPU")
    ledger = await world.ledger(node_id)
    assert list(ledger.allocations) == ["rival-kernel"]
    assert ledger.device_use() == {0: (True, 0)}  # held once, not twice
    assert [sid for sid, _ in world.stored(SessionAdmitted)] == [session_id]
    assert holdings(world.state) == holdings(world.folded_again())


async def test_a_rival_reservation_on_the_keypair_quota_keeps_the_session_waiting() -> None:
    world = World()
    owner = await world.tenancy(KeypairPolicyLimits(max_concurrent_sessions=1))
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2))
    await world.create(slots(gpu=1))
    keypair = quota_id_for(ScopeKind.KEYPAIR, owner.access_key)
    # Another replica admitted a session of the same keypair, which this one has not folded.
    await rival(world.store, Quota, keypair, lambda q: q.reserve({"rival": slots(gpu=1)}, T0))
    watched = Watched(world.store)

    await world.decide(store=watched)

    assert len(watched.handed) == 2
    assert world.stored(SessionAdmitted) == []
    ((_, noted),) = world.stored(SessionPendingReasonChanged)
    assert noted.reason == f"keypair {owner.access_key}: 1/1 concurrent sessions"
    assert set(world.state.quotas[keypair].reserved) == {"rival"}
    assert holdings(world.state) == holdings(world.folded_again())


async def test_a_session_cancelled_by_another_writer_is_not_admitted_but_given_back() -> None:
    world = World()
    owner = await world.tenancy()
    node_id = await world.register("gpu-1")
    session_id = await world.create(slots(gpu=1))
    await rival(world.store, Session, session_id, lambda s: s.terminate("user request", T0))
    mark, watched = world.last_seq(), Watched(world.store)

    await world.decide(store=watched)

    assert len(watched.handed) == 2
    assert world.stored(SessionAdmitted) == []
    assert world.stored(SessionScheduled) == []
    ((queue, dequeued),) = world.stored(QuotaSessionDequeued, after=mark)
    assert queue == quota_id_for(ScopeKind.KEYPAIR, owner.access_key)
    assert set(dequeued.sessions) == {session_id}
    assert world.state.sessions[session_id].session.status is SessionStatus.CANCELLED
    assert (await world.ledger(node_id)).allocations == {}
    assert holdings(world.state) == holdings(world.folded_again())


@pytest.mark.parametrize("stored", [True, False], ids=["stored", "not-stored"])
async def test_a_lost_answer_is_read_back_and_the_decision_stored_once(stored: bool) -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1")
    await world.decide()
    session_id = await world.create(slots(gpu=1))
    mark, commits = world.last_seq(), world.store.commits
    world.store.fail_next(stored=stored)

    await world.decide()

    assert Counter(world.names(after=mark)) == {
        "QuotaScopeOpened": 3,  # user, project, domain (the keypair's opened at create)
        "QuotaReserved": 4,
        "SessionScheduled": 1,
        "ResourcesAllocated": 1,
    }
    assert world.store.commits == commits + 1
    assert world.state.sessions[session_id].session.status is SessionStatus.SCHEDULED
    assert len((await world.ledger(node_id)).allocations) == 1
    assert holdings(world.state) == holdings(world.folded_again())


async def test_a_pass_that_keeps_conflicting_gives_up_and_gives_its_work_back() -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1")
    session_id = await world.create(slots(gpu=1))
    await world.decide()
    await world.started(session_id)
    await world.decide()
    await world.exited(session_id, 0)
    exited = [
        e.envelope.event_id for e in world.store.events() if e.envelope.name == "KernelExited"
    ]
    mark = world.last_seq()
    # Every time the pass commits, another writer has just allocated on the node.
    rivals = iter(range(100))
    watched = Watched(
        world.store, lambda: rival_allocates(world.store, node_id, f"rival-{next(rivals)}", 0)
    )

    with pytest.raises(TooManyConflictsError):
        await world.decide(store=watched, attempts=3)

    assert len(watched.handed) == 3
    assert world.stored(SessionTerminated, after=mark) == []
    assert [f.envelope.event_id for f in world.state.take_work().facts] == exited
