"""The idle timeout in memory: a keypair policy's ``idle_timeout_s`` gives a running interactive
session a deadline counted from its start or its latest reported activity; the earliest of its
time limits wins; a batch session, or a policy without one, has none; a pass ends the idle
session with the rule as its reason and spares the busy one; a refold finds the same deadline.
With ``idle_utilization_threshold_pct``, CPU or GPU use at the threshold is what counts for a
second rule, which ends a session whatever its traffic."""

from __future__ import annotations

from datetime import datetime, timedelta

from commands.activity_reports import ActivityReports
from events.domain.activity import SessionActivityReported
from events.domain.session import SessionTerminating
from events.envelope import Envelope
from events.writes import AggregateRef, Write
from schemas.activity import ActivitySource
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import SessionStatus, SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import KeypairPolicyLimits
from services.scheduler.rules.deadlines import (
    NEVER,
    LastActivity,
    any_time_limits,
    deadline_of,
)
from services.scheduler.state import SchedulerState
from tests.unit.pass_support import World, slots

IDLE = "idle: no app or terminal traffic and no output for 600s"
REPORTER = Actor.service("agent")


async def running(world: World, kind: SessionType = SessionType.INTERACTIVE) -> str:
    """A session of ``kind`` placed, started, and RUNNING as of the world's clock."""
    session_id = await world.create(slots(gpu=0), type=kind)
    await world.decide()
    await world.started(session_id)
    await world.decide()
    assert world.state.sessions[session_id].session.status is SessionStatus.RUNNING
    return session_id


async def world_with(limits: KeypairPolicyLimits) -> World:
    world = World()
    await world.tenancy(limits)
    await world.register("cpu-1", slots(cpu=8, mem=32))
    return world


def started_at(world: World, session_id: str) -> datetime:
    started = world.state.sessions[session_id].session.started_at
    assert started is not None
    return started


async def reported(
    world: World,
    session_id: str,
    source: ActivitySource,
    when: datetime,
    pct: float | None = None,
) -> None:
    """A reporter saw the session in use at ``when`` (``pct``: utilisation, for CPU and GPU)
    and wrote it; the scheduler folds it."""
    reports = ActivityReports(world.store, "reporter-1", REPORTER)
    if pct is None:
        reports.note(session_id, None, source, when.timestamp())
    else:
        reports.note_use(session_id, "k", source, when.timestamp(), pct)
    assert await reports.flush(world.clock()) == 1
    await world.sync()


def deadline(state: SchedulerState, session_id: str) -> tuple[datetime, str] | None:
    tracked = state.sessions[session_id]
    found = deadline_of(tracked.session, state.directory, tracked.activity)
    return None if found is None else (found.at, found.reason)


# ---- the rule --------------------------------------------------------------------------------


async def test_an_unused_interactive_session_is_due_its_idle_timeout_after_it_started() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    session_id = await running(world)
    assert world.owner is not None

    found = deadline(world.state, session_id)

    assert found is not None
    at, reason = found
    assert at == started_at(world, session_id) + timedelta(seconds=600)
    assert reason.startswith(IDLE)
    assert f"keypair {world.owner.access_key}'s policy idle timeout" in reason


async def test_reported_activity_moves_the_deadline_to_its_last_use() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    session_id = await running(world)
    started = started_at(world, session_id)
    world.clock.advance(400)

    await reported(world, session_id, ActivitySource.APP, started + timedelta(seconds=300))
    await reported(world, session_id, ActivitySource.OUTPUT, started + timedelta(seconds=100))

    found = deadline(world.state, session_id)
    assert found is not None and found[0] == started + timedelta(seconds=900)


def test_activity_before_the_start_or_out_of_order_keeps_the_latest() -> None:
    t = datetime.fromisoformat("2026-11-21T12:00:00+00:00")
    seen = NEVER.seen(ActivitySource.TERMINAL, t).seen(ActivitySource.APP, t - timedelta(seconds=1))

    assert seen == LastActivity(traffic=t)


async def test_the_earliest_time_limit_wins() -> None:
    lifetime_first = await world_with(
        KeypairPolicyLimits(idle_timeout_s=600, max_session_lifetime_s=300)
    )
    idle_first = await world_with(
        KeypairPolicyLimits(idle_timeout_s=600, max_session_lifetime_s=3600)
    )
    a, b = await running(lifetime_first), await running(idle_first)

    found_a, found_b = deadline(lifetime_first.state, a), deadline(idle_first.state, b)

    assert found_a is not None and "lifetime limit" in found_a[1]
    assert found_a[0] == started_at(lifetime_first, a) + timedelta(seconds=300)
    assert found_b is not None and found_b[1].startswith(IDLE)
    assert found_b[0] == started_at(idle_first, b) + timedelta(seconds=600)


async def test_a_batch_session_has_no_idle_deadline() -> None:
    idle_only = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    with_lifetime = await world_with(
        KeypairPolicyLimits(idle_timeout_s=60, max_session_lifetime_s=3600)
    )
    batch = await running(idle_only, SessionType.BATCH)
    limited = await running(with_lifetime, SessionType.BATCH)

    assert deadline(idle_only.state, batch) is None
    found = deadline(with_lifetime.state, limited)
    assert found is not None and "lifetime limit" in found[1]


async def test_without_an_idle_timeout_there_is_no_idle_deadline() -> None:
    world = await world_with(KeypairPolicyLimits(max_concurrent_sessions=5))
    session_id = await running(world)

    assert not any_time_limits(world.state.directory)
    assert deadline(world.state, session_id) is None


async def test_an_idle_timeout_alone_counts_as_a_time_limit() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))

    assert any_time_limits(world.state.directory)


# ---- the pass --------------------------------------------------------------------------------


async def test_a_pass_ends_the_idle_session_with_the_rule_and_spares_the_busy_one() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    idle, busy = await running(world), await running(world)
    world.clock.advance(500)
    await reported(world, busy, ActivitySource.TERMINAL, world.clock())
    world.clock.advance(150)  # 650 s after the start; 150 s after the busy one's last use
    mark = world.last_seq()

    await world.decide()

    ((ended, terminating),) = world.stored(SessionTerminating, after=mark)
    assert ended == idle and terminating.reason.startswith(IDLE)
    assert world.state.sessions[busy].session.status is SessionStatus.RUNNING
    assert world.state.next_wake == world.clock() + timedelta(seconds=450)


async def test_a_restarted_scheduler_folds_the_same_idle_deadline() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    session_id = await running(world)
    world.clock.advance(200)
    await reported(world, session_id, ActivitySource.OUTPUT, world.clock())

    assert deadline(world.folded_again(), session_id) == deadline(world.state, session_id)
    found = deadline(world.state, session_id)
    assert found is not None and found[0] == world.clock() + timedelta(seconds=600)


async def test_a_report_about_a_session_that_ended_changes_nothing() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    session_id = await running(world)
    await world.exited(session_id, 0)
    await world.decide()
    assert world.state.sessions[session_id].session.status is SessionStatus.TERMINATED

    await reported(world, session_id, ActivitySource.APP, world.clock())
    await reported(world, "no-such-session", ActivitySource.APP, world.clock())

    assert world.state.sessions[session_id].activity == NEVER
    assert not world.state.broken


# ---- utilisation -----------------------------------------------------------------------------

UNDERUSED = KeypairPolicyLimits(idle_timeout_s=600, idle_utilization_threshold_pct=5)


async def test_the_utilisation_rule_ends_a_session_with_traffic_but_no_use() -> None:
    world = await world_with(UNDERUSED)
    session_id = await running(world)
    started = started_at(world, session_id)
    world.clock.advance(500)
    await reported(world, session_id, ActivitySource.TERMINAL, world.clock())
    await reported(world, session_id, ActivitySource.CPU, world.clock(), pct=4.9)  # under it

    found = deadline(world.state, session_id)

    assert found is not None
    assert found[0] == started + timedelta(seconds=600)
    assert found[1].startswith("idle: CPU under 5% for 600s (keypair ")
    assert "GPU" not in found[1]


async def test_use_at_the_threshold_moves_the_utilisation_deadline() -> None:
    world = await world_with(UNDERUSED)
    session_id = await running(world)
    world.clock.advance(500)
    await reported(world, session_id, ActivitySource.GPU, world.clock(), pct=5.0)
    await reported(world, session_id, ActivitySource.OUTPUT, world.clock())

    found = deadline(world.state, session_id)

    assert found is not None and found[0] == world.clock() + timedelta(seconds=600)
    assert deadline(world.folded_again(), session_id) == found


async def test_a_gpu_session_is_told_both_thresholds() -> None:
    world = World()
    await world.tenancy(UNDERUSED)
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    session_id = await world.create(slots(gpu=1))
    await world.decide()
    await world.started(session_id)
    await world.decide()
    world.clock.advance(100)
    await reported(world, session_id, ActivitySource.APP, world.clock())

    found = deadline(world.state, session_id)

    assert found is not None and found[1].startswith("idle: CPU under 5% and GPU under 5%")


async def test_without_a_threshold_any_reported_use_counts_and_no_rule_applies() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    session_id = await running(world)
    world.clock.advance(100)

    await reported(world, session_id, ActivitySource.CPU, world.clock(), pct=2.0)

    assert world.state.sessions[session_id].activity.busy == world.clock()
    found = deadline(world.state, session_id)
    assert found is not None and found[1].startswith(IDLE)  # the traffic rule alone


async def test_an_unreadable_report_is_skipped_and_its_reporter_still_counts() -> None:
    world = await world_with(KeypairPolicyLimits(idle_timeout_s=600))
    session_id = await running(world)
    world.clock.advance(100)
    ref = AggregateRef(AggregateType.ACTIVITY, "reporter-1")
    newer = Envelope(
        event_id=new_id(), name=SessionActivityReported.event_name, schema_version=1,
        aggregate_type=AggregateType.ACTIVITY, aggregate_id=ref.id, aggregate_version=1,
        occurred_at=world.clock(), causation_id="c", correlation_id="c",
        actor=REPORTER, tenant=SYSTEM_TENANT,
        payload={"session_id": session_id, "source": "keyboard", "at": world.clock().isoformat()},
    )  # fmt: skip
    await world.store.commit([Write(ref, 0, (newer,))])  # a newer reporter's source
    await world.sync()
    assert world.state.sessions[session_id].activity == NEVER

    world.clock.advance(100)
    await reported(world, session_id, ActivitySource.OUTPUT, world.clock())

    assert not world.state.broken
    assert world.state.sessions[session_id].activity.traffic == world.clock()
