"""Preemption in the decision pass, in memory: who is stopped, with which reason, when, and
that the waiting session is placed only once its victims have given their room back."""

from __future__ import annotations

from events.domain.node import KernelStopRequested, ResourcesAllocated
from events.domain.session import SessionScheduled, SessionTerminating
from schemas.session import SessionStatus
from schemas.tenancy import GroupScheduling, KeypairPolicyLimits
from services.scheduler.steps.preempt import SEARCHES_PER_PASS
from tests.unit.pass_support import World, slots

S = SessionStatus
LIMITS = KeypairPolicyLimits(max_priority=100)
PREEMPTING = GroupScheduling(preemption=True, preemption_grace_s=0)


async def running(world: World, priority: int, gpu: int = 1) -> str:
    """A session of ``priority`` placed and started (it has run for a second)."""
    session_id = await world.create(slots(gpu=gpu), priority=priority)
    await world.decide()
    assert world.state.sessions[session_id].session.status is S.SCHEDULED
    await world.started(session_id)
    await world.decide()
    world.clock.advance(1)
    return session_id


def status(world: World, session_id: str) -> SessionStatus:
    return world.state.sessions[session_id].session.status


def reason(world: World, session_id: str) -> str:
    return world.state.sessions[session_id].session.reason


async def test_a_higher_priority_session_stops_the_lower_one_and_takes_its_place() -> None:
    world = World()
    await world.tenancy(LIMITS, PREEMPTING)
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    low = await running(world, priority=5)
    high = await world.create(slots(gpu=1), priority=50)
    mark = world.last_seq()

    await world.decide()

    ((victim, stopping),) = world.stored(SessionTerminating, after=mark)
    assert victim == low and stopping.preempted_by == high
    assert f"to make room for session {high}" in stopping.reason
    assert "priority 50 over 5" in stopping.reason
    assert [n for n, _ in world.stored(KernelStopRequested, after=mark)] == [node_id]
    assert status(world, high) is S.PENDING
    assert reason(world, high).startswith("preempting 1 lower-priority session(s) on gpu-1")
    assert world.stored(ResourcesAllocated, after=mark) == []  # nothing over-allocated

    # Further passes while the victim stops change nothing: no second victim, same reason.
    settled = world.last_seq()
    await world.decide()
    assert world.last_seq() == settled

    await world.exited(low, 137)
    await world.decide()

    assert status(world, low) is S.TERMINATED
    # Its end keeps why it was stopped; how its kernel ended is its exit code.
    assert reason(world, low).startswith(f"preempted: stopped to make room for session {high}")
    assert "kernel exited" not in reason(world, low)
    assert world.state.sessions[low].session.exit_code == 137
    assert status(world, high) is S.SCHEDULED
    assert world.state.sessions[high].session.placements
    assert high not in world.state.preempting


async def test_without_the_group_setting_nobody_is_preempted() -> None:
    world = World()
    await world.tenancy(LIMITS)  # preemption is off by default
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    low = await running(world, priority=5)
    high = await world.create(slots(gpu=1), priority=50)
    mark = world.last_seq()

    await world.decide()

    assert world.stored(SessionTerminating, after=mark) == []
    assert status(world, low) is S.RUNNING and status(world, high) is S.PENDING


async def test_equal_or_higher_priority_sessions_are_never_victims() -> None:
    world = World()
    await world.tenancy(LIMITS, PREEMPTING)
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    same = await running(world, priority=50)
    waiting = await world.create(slots(gpu=1), priority=50)
    mark = world.last_seq()

    await world.decide()

    assert world.stored(SessionTerminating, after=mark) == []
    assert status(world, same) is S.RUNNING and status(world, waiting) is S.PENDING


async def test_a_session_first_waits_out_the_grace_period() -> None:
    world = World()
    await world.tenancy(LIMITS, GroupScheduling(preemption=True, preemption_grace_s=60))
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    low = await running(world, priority=5)
    high = await world.create(slots(gpu=1), priority=50)
    await world.decide()
    assert status(world, low) is S.RUNNING
    admitted = world.state.sessions[high].placeable_since
    due = world.state.due()
    assert due is not None and due.timestamp() == admitted + 60  # a timer, not a poll

    world.clock.advance(30)
    await world.decide()
    assert status(world, low) is S.RUNNING

    world.clock.advance(31)
    await world.decide()
    assert status(world, low) is S.TERMINATING


async def test_the_fewest_then_the_youngest_are_chosen() -> None:
    world = World()
    await world.tenancy(LIMITS, PREEMPTING)
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=4))
    old = await running(world, priority=5)
    middle = await running(world, priority=5)
    young = await running(world, priority=5)
    big = await running(world, priority=5)  # the fourth device: all four are taken
    high = await world.create(slots(gpu=2), priority=50)
    mark = world.last_seq()

    await world.decide()

    victims = {v for v, _ in world.stored(SessionTerminating, after=mark)}
    assert victims == {young, big}  # two of one GPU each, the two that ran the shortest
    assert status(world, old) is S.RUNNING and status(world, middle) is S.RUNNING
    assert reason(world, high).startswith("preempting 2 lower-priority session(s)")


async def test_other_domains_are_spared_unless_the_group_allows_crossing() -> None:
    for across, stopped in ((False, False), (True, True)):
        world = World()
        settings = GroupScheduling(
            preemption=True, preemption_grace_s=0, preempt_across_domains=across
        )
        await world.tenancy(LIMITS, settings)
        await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
        low = await running(world, priority=5)
        await world.tenancy(LIMITS)  # another domain, on the same group
        high = await world.create(slots(gpu=1), priority=50)

        await world.decide()

        assert (status(world, low) is S.TERMINATING) is stopped, across
        assert status(world, high) is S.PENDING


async def test_room_already_on_its_way_back_stops_nobody() -> None:
    world = World()
    await world.tenancy(LIMITS, PREEMPTING)
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    low = await running(world, priority=5)
    await world.terminate(low)  # its owner ends it: the device comes back soon
    high = await world.create(slots(gpu=1), priority=50)
    mark = world.last_seq()

    await world.decide()

    stopping = world.stored(SessionTerminating, after=mark)
    assert all(event.preempted_by is None for _, event in stopping)
    assert high not in world.state.preempting


async def test_a_restarted_scheduler_knows_a_preemption_is_under_way() -> None:
    world = World()
    await world.tenancy(LIMITS, PREEMPTING)
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2))
    first = await running(world, priority=5)
    second = await running(world, priority=5)
    high = await world.create(slots(gpu=1), priority=50)
    await world.decide()
    assert status(world, second) is S.TERMINATING  # the younger one
    assert status(world, first) is S.RUNNING

    fresh = world.folded_again()
    assert fresh.preempting == {high: {second: None}}

    world.state = fresh  # a restarted scheduler stops nobody else while it waits
    mark = world.last_seq()
    await world.decide()
    assert world.stored(SessionTerminating, after=mark) == []

    await world.exited(second, 143)
    await world.decide()
    ((placed, _),) = world.stored(SessionScheduled, after=mark)
    assert placed == high
    assert status(world, first) is S.RUNNING


async def test_a_long_queue_is_searched_a_limited_part_per_pass_and_all_in_turn() -> None:
    world = World()
    await world.tenancy(LIMITS, PREEMPTING)
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    low = await running(world, priority=5)
    # Sessions that preempting cannot help (nothing lower-priority holds enough cpu), ahead
    # of one it can help.
    stuck = [await world.create(slots(cpu=64, gpu=0), priority=50) for _ in range(40)]
    helped = await world.create(slots(gpu=1), priority=50)
    await world.decide()
    assert status(world, low) is S.RUNNING  # the first pass searched 32 of the 41
    assert world.state.preempt_from["default"] == SEARCHES_PER_PASS
    assert all(status(world, sid) is S.PENDING for sid in stuck)

    await world.decide()

    assert status(world, low) is S.TERMINATING
    assert world.state.sessions[low].session.preempted_by == helped
