"""The scheduler's create runs on a real nats-server (``SessionCommands.create_sessions`` on
a folded state, no runner): a run is one group commit with one queue event per keypair; the
same command twice in a run makes one session; a run that loses a race on the keypair's queue
folds the winner's write and decides again, answering every create.
"""

from __future__ import annotations

from datetime import UTC, datetime

from commands.messages import CreateSession
from commands.outcome import Accepted
from commands.quota import Quota
from commands.repository import load, pending_write
from commands.runner import HandlerContext
from events.bus import Bus
from events.envelope import Cause
from events.fold import Fold
from events.store import EventStore
from events.writes import AggregateRef
from schemas.ids import new_id, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType, events_of
from schemas.tenancy import ScopeKind, SessionOwner, quota_id_for
from services.scheduler.service import FOLDED
from services.scheduler.session_commands import SessionCommands
from services.scheduler.state import SchedulerState
from tests.integration.scheduler_support import FakeAgent
from tests.tenancy_support import make_tenancy

NEED = ResourceSlots.of(cpu=1, memory=1 << 30)


async def folded(bus: Bus) -> tuple[SessionCommands, Fold[SchedulerState]]:
    state = SchedulerState()
    fold = Fold(bus, state, subjects=[events_of(kind) for kind in FOLDED])
    await fold.catch_up()

    async def sync() -> None:
        await fold.catch_up()

    return SessionCommands(state, sync), fold


def create(image: str, owner: SessionOwner) -> CreateSession:
    spec = SessionSpec(image=image, kernels=(KernelSpec(resources=NEED),))
    return CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec, owner=owner)


async def queue_events(store: EventStore, owner: SessionOwner) -> list[dict[str, object]]:
    ref = AggregateRef(AggregateType.QUOTA, quota_id_for(ScopeKind.KEYPAIR, owner.access_key))
    events = (await store.read(ref)).events
    return [e.envelope.payload for e in events if e.name == "QuotaSessionQueued"]


async def test_a_run_is_one_commit_with_one_queue_event_and_repeats_make_one_session(
    bus: Bus, store: EventStore
) -> None:
    image = f"img-{new_id()[:8]}"
    await FakeAgent(store, ResourceSlots(), (image,)).register()
    owner = (await make_tenancy(store)).owner
    commands, fold = await folded(bus)
    first, second = create(image, owner), create(image, owner)

    answers = await commands.create_sessions([first, second, first], HandlerContext(store))

    assert all(isinstance(a, Accepted) for a in answers), answers
    assert [a.aggregate_ids[0] for a in answers if isinstance(a, Accepted)] == [
        session_id_for(c.command_id) for c in (first, second, first)
    ]
    queued = await queue_events(store, owner)
    assert [sorted(q["sessions"]) for q in queued] == [  # type: ignore[call-overload]
        sorted(session_id_for(c.command_id) for c in (first, second))
    ]
    for cmd in (first, second):
        ref = AggregateRef(AggregateType.SESSION, session_id_for(cmd.command_id))
        assert [e.name for e in (await store.read(ref)).events] == ["SessionRequested"]
    await fold.close()


async def test_a_run_that_loses_a_race_on_the_queue_decides_again(
    bus: Bus, store: EventStore
) -> None:
    image = f"img-{new_id()[:8]}"
    await FakeAgent(store, ResourceSlots(), (image,)).register()
    owner = (await make_tenancy(store)).owner
    commands, fold = await folded(bus)
    ctx = HandlerContext(store)
    await commands.create_sessions([create(image, owner)], ctx)  # opens the keypair's queue
    # Another writer (a replica) queues a session the fold has not seen.
    loaded = await load(store, Quota, quota_id_for(ScopeKind.KEYPAIR, owner.access_key))
    assert loaded.aggregate is not None
    loaded.aggregate.queue({"elsewhere": NEED}, datetime.now(UTC))
    cause = Cause(causation_id=new_id(), correlation_id=new_id(),
                  actor=Actor.service("replica"), tenant=SYSTEM_TENANT)  # fmt: skip
    write = pending_write(loaded, cause)
    assert write is not None
    await store.append(write)
    conflicts = store.stats.conflicts

    cmds = [create(image, owner), create(image, owner)]
    answers = await commands.create_sessions(cmds, ctx)

    assert all(isinstance(a, Accepted) for a in answers), answers
    assert store.stats.conflicts == conflicts + 1
    quota = commands.state.quotas[quota_id_for(ScopeKind.KEYPAIR, owner.access_key)]
    assert {"elsewhere", *(session_id_for(c.command_id) for c in cmds)} <= set(quota.queued)
    await fold.close()
