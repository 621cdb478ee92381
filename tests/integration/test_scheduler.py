"""The scheduler on a real nats-server: agents simulated by writing their own events, sessions
driven by commands, outcomes asserted on the log (sessions and node ledgers).

The server is shared with other tests: every test uses its own image (placement only uses
nodes whose agent has it), host names, durable consumer and tenancy (a domain whose keypair
policy limits nothing, so admission admits every session at once).
"""

from __future__ import annotations

import asyncio

import pytest
from nats.js import api
from nats.js.errors import BadRequestError

from commands.bus import CommandBus
from commands.messages import TerminateSession
from commands.node.aggregate import Node
from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import SessionStatus
from schemas.subjects import COMMANDS_STREAM, EVENTS_STREAM, AggregateType, commands_of
from schemas.tenancy import SessionOwner
from services.scheduler.service import Scheduler
from services.scheduler.settings import SchedulerSettings
from tests.integration.leftovers import consumer_names, running_tasks, tasks_left
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    create,
    eventually,
    history,
    node_of,
    placed,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy


@pytest.fixture
async def owner(store: EventStore) -> SessionOwner:
    return (await make_tenancy(store)).owner


async def test_a_session_is_scheduled_in_one_batch_on_a_node_offering_its_image(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    await start_scheduler()
    other = FakeAgent(store, slots(cpu=64, mem=256, gpu=8), ("something-else",))
    agent = FakeAgent(store, slots(cpu=4, mem=16, gpu=2), (image,))
    await other.register()
    await agent.register()
    node = await node_of(store, agent)
    assert (node.hostname, node.resource_group, node.capacity) == (
        agent.hostname, "default", agent.capacity,
    )  # fmt: skip

    cmd = create(image, slots(cpu=1, mem=2, gpu=1), owner)
    outcome = await CommandBus(bus).execute(cmd, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    session_id = session_id_for(cmd.command_id)
    session = await session_in(store, session_id, SessionStatus.SCHEDULED)
    (kernel_id,) = session.kernel_ids
    assert session.placements == {kernel_id: agent.id}

    events = await history(store, AggregateType.SESSION, session_id)
    # Admitted and placed by one pass: its SessionScheduled admits it.
    assert [e.name for e in events] == ["SessionRequested", "SessionScheduled"]
    # The session and its place in the keypair's queue (opened for it), in one group commit.
    first = events[0].seq
    assert outcome.event_seqs == (first, first + 1, first + 2)
    queue = await history(store, AggregateType.QUOTA, f"keypair-{owner.access_key}")
    assert [(e.seq, e.name) for e in queue][:2] == [
        (first + 1, "QuotaScopeOpened"), (first + 2, "QuotaSessionQueued"),
    ]  # fmt: skip
    ledger = await history(store, AggregateType.NODE, agent.id)
    (allocated,) = [e for e in ledger if e.name == "ResourcesAllocated"]
    # One group commit: the session, its reservations on its four scopes and its node ledger,
    # stored next to each other.
    reserved = [
        e.seq
        for scope_id in (f"keypair-{owner.access_key}", f"user-{owner.user_id}",
                         f"project-{owner.project_id}", f"domain-{owner.domain}")
        for e in await history(store, AggregateType.QUOTA, scope_id)
        if e.name in ("QuotaReserved", "QuotaScopeOpened") and e.seq > first + 2
    ]  # fmt: skip
    assert allocated.seq == events[1].seq + 1  # right after its SessionScheduled
    assert len(reserved) >= 4  # one reservation per scope, and the scopes it opened
    assert sorted(reserved) == list(range(allocated.seq + 1, allocated.seq + 1 + len(reserved)))
    assert allocated.envelope.payload["kernel_id"] == kernel_id
    node = await node_of(store, agent)
    allocation = node.allocations[kernel_id]
    assert (allocation.session_id, allocation.slots, allocation.image) == (
        session_id, slots(cpu=1, mem=2, gpu=1), image,
    )  # fmt: skip
    assert (allocation.command, allocation.env) == (("sleep", "60"), {"JY_TEST": "1"})


async def test_kernel_facts_drive_the_session_and_free_the_node(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    scheduler = await start_scheduler()
    agent = FakeAgent(store, slots(cpu=4, mem=16, gpu=2), (image,))
    await agent.register()
    await node_of(store, agent)
    commands = CommandBus(bus)

    session = await placed(store, commands, image, slots(gpu=2), owner)
    (kernel_id,) = session.kernel_ids
    await agent.started(kernel_id, session.id)
    await session_in(store, session.id, SessionStatus.RUNNING)
    await agent.exited(kernel_id, 3)
    ended = await session_in(store, session.id, SessionStatus.TERMINATED)
    assert ended.exit_code == 3
    assert "code 3" in ended.reason
    node = await node_of(store, agent)
    assert node.allocations == {}
    assert node.free == node.capacity

    # A late repeat of a fact changes nothing.
    before = await history(store, AggregateType.SESSION, session.id)
    await agent.started(kernel_id, session.id)
    await scheduler.settle()
    assert await history(store, AggregateType.SESSION, session.id) == before

    # A kernel that fails to start ends its session in ERROR and gives its slots back.
    failing = await placed(store, commands, image, slots(gpu=2), owner)
    (kernel_id,) = failing.kernel_ids
    await agent.failed(kernel_id, failing.id, "image pull failed")
    errored = await session_in(store, failing.id, SessionStatus.ERROR)
    assert "image pull failed" in errored.reason
    assert (await node_of(store, agent)).allocations == {}


async def test_terminating_a_running_session_asks_its_node_to_stop_it(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=4, mem=16), (image,))
    await agent.register()
    await node_of(store, agent)
    commands = CommandBus(bus)
    session = await placed(store, commands, image, slots(cpu=2), owner)
    (kernel_id,) = session.kernel_ids
    await agent.started(kernel_id, session.id)
    await session_in(store, session.id, SessionStatus.RUNNING)

    terminate = TerminateSession(
        actor=Actor.service("tests"), tenant=SYSTEM_TENANT, session_id=session.id, reason="done"
    )
    outcome = await commands.execute(terminate, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    await session_in(store, session.id, SessionStatus.TERMINATING)
    node = await node_of(store, agent)
    assert node.allocations[kernel_id].stopping
    ledger = await history(store, AggregateType.NODE, agent.id)
    events = await history(store, AggregateType.SESSION, session.id)
    # Session and ledger changed in one group commit.
    assert ledger[-1].name == "KernelStopRequested"
    assert events[-1].name == "SessionTerminating"
    assert ledger[-1].seq == events[-1].seq + 1
    assert set(outcome.event_seqs) == {events[-1].seq, ledger[-1].seq}

    await agent.exited(kernel_id, 137)
    await session_in(store, session.id, SessionStatus.TERMINATED)
    assert (await node_of(store, agent)).allocations == {}


async def test_a_session_that_fits_nowhere_waits_with_a_reason_until_a_node_can_take_it(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    await start_scheduler()
    small = FakeAgent(store, slots(cpu=4, mem=16), (image,))
    await small.register()
    await node_of(store, small)
    commands = CommandBus(bus)

    cmd = create(image, slots(cpu=2, mem=64), owner)
    outcome = await commands.execute(cmd, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    session_id = session_id_for(cmd.command_id)

    async def reason() -> str | None:
        session = (await load(store, Session, session_id)).aggregate
        return session.reason if session and session.reason != "requested" else None

    expected = (
        "no node in group default has 64 GiB of memory even when idle "
        f"(largest: 16 GiB on {small.hostname}); it waits for a larger node to join the group"
    )
    assert await eventually(reason) == expected
    assert (await load(store, Session, session_id)).aggregate.status is SessionStatus.PENDING  # type: ignore[union-attr]

    big = FakeAgent(store, slots(cpu=8, mem=128), (image,))
    await big.register()
    session = await session_in(store, session_id, SessionStatus.SCHEDULED)
    assert set(session.placements.values()) == {big.id}


async def test_terminating_a_waiting_session_cancels_it_and_unknown_ones_are_not_found(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=1, mem=1), (image,))
    await agent.register()
    commands = CommandBus(bus)
    cmd = create(image, slots(cpu=2), owner)
    assert (await commands.execute(cmd, timeout=5)).accepted  # type: ignore[union-attr]
    session_id = session_id_for(cmd.command_id)

    def terminate(target: str) -> TerminateSession:
        return TerminateSession(
            actor=Actor.service("tests"), tenant=SYSTEM_TENANT, session_id=target
        )

    outcome = await commands.execute(terminate(session_id), timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    cancelled = await session_in(store, session_id, SessionStatus.CANCELLED)
    assert cancelled.reason == "cancelled by service tests"

    again = await commands.execute(terminate(session_id), timeout=5)
    assert again is not None and again.accepted and again.event_seqs == ()
    unknown = await commands.execute(terminate(new_id()), timeout=5)
    assert unknown is not None and unknown.code == "not-found", unknown


async def test_an_image_no_agent_has_is_rejected_and_nothing_is_stored(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    await start_scheduler()
    cmd = create(image, slots(), owner)
    outcome = await CommandBus(bus).execute(cmd, timeout=5)
    assert outcome is not None and not outcome.accepted
    assert outcome.code == "invalid"
    assert f"no registered agent has image {image}" in outcome.message
    assert await history(store, AggregateType.SESSION, session_id_for(cmd.command_id)) == []


async def test_a_restarted_scheduler_catches_up_and_continues_without_duplicates(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    first = await start_scheduler()
    agent = FakeAgent(store, slots(cpu=4, mem=16), (image,))
    await agent.register()
    await node_of(store, agent)
    commands = CommandBus(bus)
    running = await placed(store, commands, image, slots(cpu=1), owner)
    await first.stop()

    # While no scheduler runs: a kernel starts, the agent restarts, a command waits.
    (kernel_id,) = running.kernel_ids
    await agent.started(kernel_id, running.id)
    await agent.register(epoch=2)
    waiting = create(image, slots(cpu=1), owner)
    await commands.send(waiting)

    second = await start_scheduler()
    await session_in(store, running.id, SessionStatus.RUNNING)
    later = await session_in(store, session_id_for(waiting.command_id), SessionStatus.SCHEDULED)
    await second.settle()

    names = [e.name for e in await history(store, AggregateType.SESSION, running.id)]
    assert names == ["SessionRequested", "SessionScheduled", "SessionStarted"]
    names = [e.name for e in await history(store, AggregateType.SESSION, later.id)]
    assert names == ["SessionRequested", "SessionScheduled"]
    ledger = [e.name for e in await history(store, AggregateType.NODE, agent.id)]
    assert ledger == ["NodeRegistered", "ResourcesAllocated", "ResourcesAllocated"]

    # Registering again with other hardware changes the ledger's capacity, once.
    await agent.register(epoch=3, capacity=slots(cpu=8, mem=16))

    async def grown() -> Node | None:
        node = await node_of(store, agent)
        return node if node.capacity == slots(cpu=8, mem=16) else None

    await eventually(grown)
    await second.settle()
    ledger = [e.name for e in await history(store, AggregateType.NODE, agent.id)]
    assert ledger[3:] == ["NodeCapacityChanged"]


async def test_sessions_created_together_are_placed_in_few_group_commits_without_overbooking(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    scheduler = await start_scheduler()
    agents = [FakeAgent(store, slots(cpu=10, mem=64, gpu=10), (image,)) for _ in range(5)]
    await asyncio.gather(*(agent.register() for agent in agents))
    for agent in agents:
        await node_of(store, agent)
    await scheduler.settle()
    batches = scheduler.store.stats.batches

    commands = CommandBus(bus)
    cmds = [create(image, slots(cpu=1, mem=1, gpu=1), owner) for _ in range(50)]
    outcomes = await asyncio.gather(*(commands.execute(cmd, timeout=10) for cmd in cmds))
    assert all(o is not None and o.accepted for o in outcomes), outcomes
    for cmd in cmds:
        await session_in(store, session_id_for(cmd.command_id), SessionStatus.SCHEDULED)

    nodes = [await node_of(store, agent) for agent in agents]
    assert sum(len(node.allocations) for node in nodes) == 50
    for node in nodes:
        assert node.allocated.fits_in(node.capacity), node.allocations
    commits = scheduler.store.stats.batches - batches
    conflicts = scheduler.store.stats.conflicts
    # Creates share the writing lock with the passes, so a pass may wait a turn or two.
    assert commits <= 50 // 2, f"{commits} group commits for 50 sessions, {conflicts} conflicts"


async def test_a_pass_larger_than_a_batch_is_stored_in_several_batches_in_order(
    bus: Bus,
    store: EventStore,
    image: str,
    start_scheduler: StartScheduler,
    owner: SessionOwner,
) -> None:
    # Three events per batch at most: each placement gets a batch of its own, and every
    # batch carries the node ledger's guard on from the batch before it.
    scheduler = await start_scheduler(max_batch_events=3, pass_linger_s=0.05)
    agent = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await agent.register()
    await node_of(store, agent)
    await scheduler.settle()
    conflicts, batches, passes = (
        scheduler.store.stats.conflicts, scheduler.store.stats.batches, scheduler.passes,
    )  # fmt: skip

    commands = CommandBus(bus)
    cmds = [create(image, slots(cpu=1, mem=1), owner) for _ in range(6)]
    await asyncio.gather(*(commands.send(cmd) for cmd in cmds))
    for cmd in cmds:
        await session_in(store, session_id_for(cmd.command_id), SessionStatus.SCHEDULED)
    assert scheduler.store.stats.conflicts == conflicts
    # Fewer passes than batches: some pass stored its decisions in several batches. Each
    # session is admitted and placed by one pass: one unit of its SessionScheduled, its
    # allocation and its reservations on four scopes, too large to share a batch.
    assert scheduler.store.stats.batches - batches == 6
    assert scheduler.passes - passes < 6
    ledger = await history(store, AggregateType.NODE, agent.id)
    assert [e.name for e in ledger].count("ResourcesAllocated") == 6
    assert len((await node_of(store, agent)).allocations) == 6


async def test_a_start_refused_its_command_consumer_stops_what_it_started(bus: Bus) -> None:
    # Another consumer holds cmd.session.* on the work-queue stream: the scheduler has caught
    # up, started following and deciding, and then cannot take commands.
    holder = f"holder-{new_id()[:8]}"
    await bus.js.add_consumer(
        COMMANDS_STREAM,
        api.ConsumerConfig(
            durable_name=holder,
            filter_subject=commands_of(AggregateType.SESSION),
            ack_policy=api.AckPolicy.EXPLICIT,
        ),
    )
    try:
        readers, tasks = await consumer_names(bus, EVENTS_STREAM), running_tasks()
        durable = f"scheduler-test-{new_id()[:8]}"
        scheduler = Scheduler(bus, SchedulerSettings(durable=durable, poll_timeout_s=0.25))
        with pytest.raises(BadRequestError, match="filtered consumer not unique"):
            await scheduler.start()
        assert await tasks_left(tasks) == []
        assert await consumer_names(bus, EVENTS_STREAM) <= readers  # its fold's reader is gone
        assert durable not in await consumer_names(bus, COMMANDS_STREAM)
    finally:
        await bus.js.delete_consumer(COMMANDS_STREAM, holder)
