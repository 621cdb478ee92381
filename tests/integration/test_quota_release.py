"""Quota given back with a session's end, through the real scheduler on a real nats-server:
the decision that ends a session also releases what every scope held for it, stored in the
same commit and ahead of the end, so no reader sees a session ended and its quota still held
(before, the release waited for the next pass with something to admit). The end keeps its
cause as its final reason."""

from __future__ import annotations

from commands.bus import CommandBus
from commands.messages import TerminateSession
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ZERO
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from schemas.tenancy import quota_id_for
from services.gateway.core.folds import QuotaUse
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    history,
    node_of,
    requested,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy


async def test_rm_gives_the_quota_back_in_the_decision_that_ends_the_session(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    group = f"rg-{new_id()[:8]}"
    tenancy = await make_tenancy(store, resource_group=group)
    owner = tenancy.owner
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=2, mem=2), (image,), group=group)
    await agent.register()
    await node_of(store, agent)
    # One that never fits stays waiting: the pass that ends the other has placement work
    # left (the case the issue met: its release waited for the next request).
    never = await requested(bus, image, owner, slots(cpu=8, mem=1), resource_group=group)
    session_id = await requested(bus, image, owner, slots(cpu=1, mem=1), resource_group=group)
    session = await session_in(store, session_id, SessionStatus.SCHEDULED)
    (kernel_id,) = session.kernel_ids
    await agent.started(kernel_id, session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    use = QuotaUse(bus, poll_timeout_s=0.2, retry_after_s=0.2)
    await use.start()
    try:
        await use.sync(timeout=5.0)
        for kind, scope_id in owner.scopes():
            assert use.held(kind, scope_id) == slots(cpu=1, mem=1)
            assert use.waiting(kind, scope_id) == slots(cpu=8, mem=1)

        stop = TerminateSession(
            actor=Actor.service("tests"), tenant=SYSTEM_TENANT, session_id=session_id
        )
        outcome = await CommandBus(bus).execute(stop, timeout=10)
        assert outcome is not None and outcome.accepted, outcome
        await session_in(store, session_id, SessionStatus.TERMINATING)
        await agent.exited(kernel_id, 143)
        await session_in(store, session_id, SessionStatus.TERMINATED)

        events = await history(store, AggregateType.SESSION, session_id)
        (ended,) = [e for e in events if e.envelope.name == "SessionTerminated"]
        for kind, scope_id in owner.scopes():
            scope = await history(store, AggregateType.QUOTA, quota_id_for(kind, scope_id))
            (released,) = [
                e
                for e in scope
                if e.envelope.name == "QuotaReleased"
                and session_id in e.envelope.payload["sessions"]
            ]
            # One decision (the same cause, the kernel's exit), stored just ahead of the end.
            assert released.envelope.causation_id == ended.envelope.causation_id
            assert ended.seq - 4 <= released.seq < ended.seq
        # The gateway, having folded as far as the end, shows nothing held any more.
        await use.sync(timeout=5.0)
        for kind, scope_id in owner.scopes():
            assert use.held(kind, scope_id) == ZERO
            assert use.waiting(kind, scope_id) == slots(cpu=8, mem=1)
        # The end keeps its cause, not the kernel's exit code (143 after a stop).
        final = await session_in(store, session_id, SessionStatus.TERMINATED)
        assert final.reason == "terminated by service tests"
        assert final.exit_code == 143
    finally:
        await use.stop()
    assert (await session_in(store, never, SessionStatus.PENDING)).admitted
