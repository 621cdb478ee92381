"""Quota admission on a real nats-server with the real scheduler: concurrent creates against
keypair, project and pending limits, two replicas (with and without leases), a deactivated
keypair, and a replay of the log proving no scope was ever over its limit.

Nodes here are too small to place anything: sessions stay PENDING once admitted, so what is
asserted is admission alone (``session.admitted`` and the quota aggregates).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from commands.bus import CommandBus
from commands.messages import CreateSession, TerminateSession
from commands.outcome import Outcome
from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import StoredEvent
from events.store import EventStore
from events.writes import AggregateRef
from schemas.ids import new_id, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionStatus, SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import (
    DefaultForUnspecified,
    KeypairPolicyLimits,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    quota_id_for,
)
from services.scheduler.service import Scheduler
from tests.integration.scheduler_support import FakeAgent, eventually
from tests.tenancy_support import Tenancy, add_member, deactivate_keypair, make_tenancy

StartScheduler = Callable[..., Awaitable[Scheduler]]
ONE_GPU = ResourceSlots.of(cpu=1, memory=1 << 30, gpu=1)


@pytest.fixture
async def image(store: EventStore) -> str:
    """An image an agent offers, on a node with no room: nothing is ever placed."""
    name = f"img-{new_id()[:8]}"
    await FakeAgent(store, ResourceSlots(), (name,)).register()
    return name


def create(image: str, owner: SessionOwner, need: ResourceSlots = ONE_GPU) -> CreateSession:
    spec = SessionSpec(image=image, kernels=(KernelSpec(resources=need),))
    return CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec, owner=owner)


async def create_all(bus: Bus, cmds: list[CreateSession]) -> list[Outcome]:
    commands = CommandBus(bus)
    outcomes = await asyncio.gather(*(commands.execute(cmd, timeout=20) for cmd in cmds))
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


async def sessions(store: EventStore, cmds: list[CreateSession]) -> list[Session]:
    loaded = [(await load(store, Session, session_id_for(c.command_id))).aggregate for c in cmds]
    return [s for s in loaded if s is not None]


async def settled(store: EventStore, cmds: list[CreateSession], admitted: int) -> list[Session]:
    """The sessions once exactly ``admitted`` are admitted and every other has a reason."""

    async def check() -> list[Session] | None:
        found = await sessions(store, cmds)
        done = sum(s.admitted for s in found) == admitted and all(
            s.admitted or s.reason != "requested" for s in found
        )
        return found if done else None

    return await eventually(check, timeout=15)


async def requested_seq(store: EventStore, session_id: str) -> int:
    events = (await store.read(AggregateRef(AggregateType.SESSION, session_id))).events
    return events[0].seq


async def quiet(*schedulers: Scheduler) -> None:
    for scheduler in schedulers:
        await scheduler.settle()
    await asyncio.sleep(0.3)  # a second replica's pass, if any, lands too
    for scheduler in schedulers:
        await scheduler.settle()


async def check_concurrent_limit(
    bus: Bus, store: EventStore, image: str, schedulers: list[Scheduler], tenancy: Tenancy
) -> None:
    cmds = [create(image, tenancy.owner) for _ in range(50)]
    outcomes = await create_all(bus, cmds)
    assert all(o.accepted for o in outcomes), [o.message for o in outcomes if not o.accepted]
    found = await settled(store, cmds, admitted=5)
    await quiet(*schedulers)
    found = await sessions(store, cmds)
    admitted = [s for s in found if s.admitted]
    waiting = [s for s in found if not s.admitted]
    assert len(admitted) == 5 and len(waiting) == 45
    assert all(s.status is SessionStatus.PENDING for s in found)
    reason = f"keypair {tenancy.access_key}: 5/5 concurrent sessions"
    assert {s.reason for s in waiting} == {reason}

    # Terminating one admits exactly one more: the oldest waiting one.
    order = {s.id: await requested_seq(store, s.id) for s in waiting}
    oldest = min(order, key=order.__getitem__)
    terminate = TerminateSession(
        actor=Actor.service("tests"), tenant=SYSTEM_TENANT, session_id=admitted[0].id
    )
    outcome = await CommandBus(bus).execute(terminate, timeout=10)
    assert outcome is not None and outcome.accepted, outcome
    await settled(store, [c for c in cmds if session_id_for(c.command_id) != admitted[0].id], 5)
    await quiet(*schedulers)
    found = await sessions(store, cmds)
    now_admitted = {s.id for s in found if s.admitted and s.status is SessionStatus.PENDING}
    assert now_admitted == {s.id for s in admitted[1:]} | {oldest}
    keypair = quota_id_for(ScopeKind.KEYPAIR, tenancy.access_key)
    log = await domain_log(store, [tenancy], cmds)
    assert_replay_within_limits(log, {keypair: (SlotLimits(), 5)})


async def test_fifty_concurrent_creates_against_five_concurrent_sessions(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    scheduler = await start_scheduler()
    tenancy = await make_tenancy(store, limits=KeypairPolicyLimits(max_concurrent_sessions=5))
    await check_concurrent_limit(bus, store, image, [scheduler], tenancy)


@pytest.mark.parametrize("lag_s", [0.0, 0.15], ids=["following", "lagging"])
@pytest.mark.parametrize("leases", [True, False])
async def test_two_replicas_admit_the_same_way_with_or_without_leases(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    leases: bool,
    lag_s: float,
) -> None:
    """Both modes admit in request order. Lagging, each replica folds its own requests (from
    their acks) well before the other's earlier ones: its fold order is not request order."""
    first = await start_scheduler(leases=leases)
    second = await start_scheduler(leases=leases)
    for scheduler in (first, second):
        lag(scheduler, lag_s)
    tenancy = await make_tenancy(store, limits=KeypairPolicyLimits(max_concurrent_sessions=5))
    await check_concurrent_limit(bus, store, image, [first, second], tenancy)


def lag(scheduler: Scheduler, seconds: float) -> None:
    """Make every read of the scheduler's tail start ``seconds`` late (a busy replica)."""
    if not seconds:
        return
    poll = scheduler.fold.poll

    async def late(timeout: float = 1.0) -> list[StoredEvent]:
        await asyncio.sleep(seconds)
        return await poll(timeout)

    scheduler.fold.poll = late  # type: ignore[method-assign]


async def test_a_full_project_holds_its_sessions_and_not_its_neighbours(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    scheduler = await start_scheduler()
    lab = await make_tenancy(store, project_slots=SlotLimits(gpu_hundredths=800))
    other = await add_member(store, lab)
    lab_cmds = [create(image, lab.owner) for _ in range(20)]
    other_cmds = [create(image, other.owner) for _ in range(5)]
    outcomes = await create_all(bus, lab_cmds + other_cmds)
    assert all(o.accepted for o in outcomes)
    await settled(store, lab_cmds + other_cmds, admitted=8 + 5)
    await quiet(scheduler)
    in_lab = await sessions(store, lab_cmds)
    assert sum(s.admitted for s in in_lab) == 8
    reason = f"project {lab.project_name}: gpu 8/8 in use"
    assert {s.reason for s in in_lab if not s.admitted} == {reason}
    assert all(s.admitted for s in await sessions(store, other_cmds))
    log = await domain_log(store, [lab, other], lab_cmds + other_cmds)
    project = quota_id_for(ScopeKind.PROJECT, lab.project_id)
    assert_replay_within_limits(log, {project: (SlotLimits(gpu_hundredths=800), None)})


async def test_max_pending_sessions_refuses_the_thirty_first_create(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    await start_scheduler()
    limits = KeypairPolicyLimits(max_concurrent_sessions=0, max_pending_sessions=30)
    tenancy = await make_tenancy(store, limits=limits)
    cmds = [create(image, tenancy.owner) for _ in range(50)]
    outcomes = await create_all(bus, cmds)
    accepted = [o for o in outcomes if o.accepted]
    refused = [o for o in outcomes if not o.accepted]
    assert (len(accepted), len(refused)) == (30, 20)
    assert {o.code for o in refused} == {"quota-exceeded"}
    assert all("max pending sessions" in o.message for o in refused), refused[0].message
    queue = await store.read(AggregateRef(AggregateType.QUOTA, f"keypair-{tenancy.access_key}"))
    queued = [e.envelope.payload for e in queue.events if e.name == "QuotaSessionQueued"]
    assert sum(len(payload["sessions"]) for payload in queued) == 30


async def test_a_deactivated_keypair_loses_its_waiting_sessions_and_creates_nothing(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    scheduler = await start_scheduler()
    tenancy = await make_tenancy(store, limits=KeypairPolicyLimits(max_concurrent_sessions=1))
    cmds = [create(image, tenancy.owner) for _ in range(3)]
    assert all(o.accepted for o in await create_all(bus, cmds))
    await settled(store, cmds, admitted=1)

    await deactivate_keypair(store, tenancy, "left the lab")

    async def cancelled() -> list[Session] | None:
        found = await sessions(store, cmds)
        return found if all(s.status is SessionStatus.CANCELLED for s in found) else None

    found = await eventually(cancelled, timeout=10)
    assert {s.reason for s in found} == {f"keypair {tenancy.access_key} was deactivated"}
    await scheduler.settle()
    # Everything it held or queued is given back.
    for quota_id in (f"keypair-{tenancy.access_key}", f"project-{tenancy.project_id}"):
        held = await scheduler_quota(scheduler, quota_id)
        assert held == ({}, {}), quota_id
    outcome = (await create_all(bus, [create(image, tenancy.owner)]))[0]
    assert not outcome.accepted and outcome.code == "forbidden", outcome
    assert tenancy.access_key in outcome.message


async def scheduler_quota(scheduler: Scheduler, quota_id: str) -> tuple[dict[str, Any], ...]:
    quota = scheduler.state.quotas.get(quota_id)
    assert quota is not None
    return dict(quota.queued), dict(quota.reserved)


async def test_a_session_without_an_owner_is_refused(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    await start_scheduler()
    spec = SessionSpec(image=image, kernels=(KernelSpec(resources=ONE_GPU),))
    cmd = CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec)
    outcome = (await create_all(bus, [cmd]))[0]
    assert (outcome.accepted, outcome.code, outcome.message) == (
        False, "invalid", "a session needs an owner",
    )  # fmt: skip


async def test_only_a_service_starts_an_inference_session(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    # Inference sessions are an endpoint's replicas: a person asking for one (even sent
    # straight to the command stream) is told to make an endpoint; the serving controller's
    # create is taken.
    await start_scheduler()
    tenancy = await make_tenancy(store)
    spec = SessionSpec(
        image=image, type=SessionType.INFERENCE, service_port=8000,
        kernels=(KernelSpec(resources=ONE_GPU),),
    )  # fmt: skip
    by_person = CreateSession(
        actor=Actor(kind=ActorKind.KEYPAIR, id=tenancy.access_key), tenant=SYSTEM_TENANT,
        spec=spec, owner=tenancy.owner,
    )  # fmt: skip
    by_controller = CreateSession(
        actor=Actor.service("serving"), tenant=SYSTEM_TENANT, spec=spec, owner=tenancy.owner
    )
    refused, taken = await create_all(bus, [by_person, by_controller])
    assert (refused.accepted, refused.code) == (False, "invalid")
    assert "create an endpoint" in refused.message
    assert taken.accepted, taken
    session = (await load(store, Session, session_id_for(by_controller.command_id))).aggregate
    assert session is not None and session.spec.service_port == 8000


# ---- replay -------------------------------------------------------------------------------


async def domain_log(
    store: EventStore, tenancies: list[Tenancy], cmds: list[CreateSession]
) -> list[StoredEvent]:
    """Every quota and session event of the test's domain, in stream order."""
    scopes = {scope for t in tenancies for scope in t.owner.scopes()}
    refs = [AggregateRef(AggregateType.QUOTA, quota_id_for(k, i)) for k, i in scopes]
    refs += [AggregateRef(AggregateType.SESSION, session_id_for(c.command_id)) for c in cmds]
    events = [e for ref in refs for e in (await store.read(ref)).events]
    return sorted(events, key=lambda e: e.seq)


def assert_replay_within_limits(
    log: list[StoredEvent], limits: dict[str, tuple[SlotLimits, int | None]]
) -> None:
    """Recompute every scope's reservations event by event: none ever exceeds its limits
    (``limits``: quota id -> slot limits and max sessions), no session is reserved twice on a
    scope, and every admitted session (or placed: admitted by its placement) is reserved on its
    four scopes."""
    reserved: dict[str, dict[str, ResourceSlots]] = {}
    admitted: set[str] = set()
    reservations: dict[str, int] = {}
    for event in log:
        payload = event.envelope.payload
        scope = event.envelope.aggregate_id
        if event.name == "QuotaReserved":
            held = reserved.setdefault(scope, {})
            for session_id, taken in payload["sessions"].items():
                assert session_id not in held, f"{session_id} reserved twice on {scope}"
                held[session_id] = ResourceSlots.model_validate(taken)
                reservations[session_id] = reservations.get(session_id, 0) + 1
            slots, sessions = limits.get(scope, (SlotLimits(), None))
            used = sum(held.values(), ResourceSlots())
            assert slots.over(used, DefaultForUnspecified.UNLIMITED) == [], (scope, event.seq)
            assert sessions is None or len(held) <= sessions, (scope, len(held), event.seq)
        elif event.name == "QuotaReleased":
            for session_id in payload["sessions"]:
                reserved.get(scope, {}).pop(session_id, None)
        elif event.name in ("SessionAdmitted", "SessionScheduled"):
            # Admitted and placed by one pass: its SessionScheduled admits it.
            admitted.add(event.envelope.aggregate_id)
    assert admitted, "nothing was admitted"
    assert all(reservations.get(sid) == 4 for sid in admitted), reservations
