"""The usage view on a real nats-server, on SQLite and on PostgreSQL: the known history of the
unit table (``tests/unit/usage_history.py``: a node loss, a requeue, late reports) written to
the log, projected by a projector that is stopped midway and started again, then rebuilt from
the first event, adds up to the same table each time; and a node lost under a running kernel
through the real scheduler ends the kernel's interval at the release the scheduler wrote.

The log is shared with the other tests: every id this module makes carries a tag of its own,
and each database is the test's own."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from events.domain.agent import KernelStarted
from events.domain.node import ResourcesAllocated, ResourcesReleased
from events.envelope import StoredEvent
from events.store import EventStore
from events.writes import AggregateRef, Write
from projections.rebuild import rebuild
from projections.runner import Projector
from projections.usage.accounting import MICROS, DeviceUsage, UsageGroup, UsageLine
from projections.usage.queries import UsageScope, usage
from projections.usage.tables import KernelInterval, kernel_from_row, tables
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus
from schemas.subjects import HEARTBEATS_BUCKET, AggregateType
from schemas.tenancy import SessionOwner
from services.gateway.cluster.holding import OpenKernels
from services.gateway.core.usage_views import SqlUsageViews
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    eventually,
    history,
    node_of,
    requested,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy
from tests.unit.usage_history import (
    END,
    EXPECTED,
    N1,
    WINDOW,
    Cast,
    Line,
    as_lines,
    as_reported,
    at,
    known_history,
)

NEED = ResourceSlots(cpu_milli=2000, memory_bytes=1 << 30, gpu_hundredths=50)


def tagged_cast() -> Cast:
    """The unit history's people and ids, with a tag of this test's own on every one."""
    tag = f"-{new_id()[:8]}"
    people = {
        name: SessionOwner(
            access_key=f"AK{name.upper()}{tag[1:]}",
            user_id=f"u-{name}{tag}",
            project_id=f"p-{name}{tag}",
            domain=f"{domain}{tag}",
        )
        for name, domain in (("alice", "d1"), ("bob", "d1"), ("carol", "d2"))
    }
    return Cast(people=people, tag=tag)


async def write(
    store: EventStore, events: list[StoredEvent], guards: dict[AggregateRef, int]
) -> None:
    """Append the history's envelopes as they are (their times included), each guarded."""
    for event in events:
        env = event.envelope
        ref = AggregateRef(env.aggregate_type, env.aggregate_id)
        committed = await store.append(Write(ref, guards.get(ref, 0), (env,)))
        guards[ref] = committed.seqs[-1]


def split_at_the_loss(cast: Cast) -> tuple[list[StoredEvent], list[StoredEvent]]:
    """The known history up to its node loss, and from it on."""
    events = known_history(cast).events
    cut = next(i for i, e in enumerate(events) if e.name == "NodeLost")
    return events[:cut], events[cut:]


async def project(engine: AsyncEngine, bus: Bus) -> None:
    """A projector that catches up with the log and stops (a restart starts a new one)."""
    projector = Projector(engine, bus)
    try:
        await projector.catch_up(timeout=0.5)
    finally:
        await projector.close()


async def mine(engine: AsyncEngine, cast: Cast, group_by: str, start: float = 0.0,
               end: float = END) -> list[Line]:  # fmt: skip
    lines = await usage(
        engine, group_by=UsageGroup(group_by), start=at(start), end=at(end), now=at(END)
    )
    return as_lines([line for line in lines if line.key.endswith(cast.tag)])


async def test_the_known_history_adds_up_across_a_restart_and_a_rebuild(
    bus: Bus, store: EventStore, database_url: str, engine: AsyncEngine
) -> None:
    cast = tagged_cast()
    before_loss, loss = split_at_the_loss(cast)
    guards: dict[AggregateRef, int] = {}
    await write(store, before_loss, guards)
    await project(engine, bus)
    await write(store, loss, guards)  # the node loss, while no projector runs
    await project(engine, bus)  # a restart: from the stored position
    expected = {g: as_reported(rows, cast) for g, rows in EXPECTED.items()}
    for group_by, rows in expected.items():
        assert await mine(engine, cast, group_by) == rows, group_by
    assert await mine(engine, cast, "user", 100, 200) == as_reported(WINDOW, cast)

    await rebuild(database_url, bus)  # from the first event, swapped in
    for group_by, rows in expected.items():
        assert await mine(engine, cast, group_by) == rows, group_by
    sessions = await usage(
        engine, group_by=UsageGroup.SESSION, start=at(0), end=at(END), now=at(END),
        scope=UsageScope(domain=cast.key("d1"), user_id=cast.key("alice")),
    )  # fmt: skip
    assert [(line.key, line.name) for line in sessions] == [
        (cast.id("s1"), "train"), (cast.id("s2"), "share"),
    ]  # fmt: skip


def open_of(kernels: Iterable[KernelInterval], cast: Cast) -> dict[str, KernelInterval]:
    return {k.kernel_id: k for k in kernels if k.domain.endswith(cast.tag)}


async def test_the_gateways_copy_of_the_open_kernels_follows_the_changes_alone(
    bus: Bus, store: EventStore, engine: AsyncEngine
) -> None:
    # The operators' GPU map reads who holds what from a copy kept by reading only the rows
    # changed since (``OpenKernels``): across the node loss it must agree with a whole read,
    # and move the version of the node that changed only.
    cast = tagged_cast()
    before_loss, loss = split_at_the_loss(cast)
    guards: dict[AggregateRef, int] = {}
    await write(store, before_loss, guards)
    await project(engine, bus)
    views = SqlUsageViews(engine)
    copy = OpenKernels(views)
    before = await copy.now()
    mine_before = open_of(before.kernels(), cast)
    assert mine_before == open_of(await views.holding(), cast)
    lost = cast.id(N1)
    assert {k.node_id for k in mine_before.values()} >= {lost}

    await write(store, loss, guards)  # the node loss releases its kernels
    await project(engine, bus)
    after = await copy.now()
    mine_after = open_of(after.kernels(), cast)
    assert mine_after == open_of(await views.holding(), cast)
    assert not any(k.node_id == lost for k in mine_after.values())
    assert after.version(lost) != before.version(lost)
    touched = {
        e.envelope.aggregate_id for e in loss if e.envelope.aggregate_type is AggregateType.NODE
    }  # fmt: skip
    for node in {k.node_id for k in mine_before.values()} - touched:
        assert after.version(node) == before.version(node), node
    assert await copy.now() is after  # nothing changed since: the same answer


async def beat(bus: Bus, agent: FakeAgent) -> None:
    kv = await bus.js.key_value(HEARTBEATS_BUCKET)
    await kv.put(f"agent.{agent.id}", json.dumps({"agent_id": agent.id, "epoch": 1}).encode())


async def interval(engine: AsyncEngine, kernel_id: str) -> KernelInterval:
    k = tables().kernels
    async with engine.connect() as conn:
        row = (await conn.execute(select(k).where(k.c.kernel_id == kernel_id))).one()
    return kernel_from_row(row)


async def test_a_node_lost_under_a_running_kernel_ends_its_interval_at_the_release(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, engine: AsyncEngine
) -> None:
    owner = (await make_tenancy(store)).owner
    dead = FakeAgent(store, slots(cpu=8, mem=8, gpu=1), (image,))
    await dead.register()
    await beat(bus, dead)
    await start_scheduler(watch_heartbeats=True)
    await node_of(store, dead)
    session_id = await requested(bus, image, owner, NEED)
    (kernel_id,) = (await session_in(store, session_id, SessionStatus.SCHEDULED)).kernel_ids
    await dead.started(kernel_id, session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    await project(engine, bus)
    (started,) = [
        e.envelope.occurred_at
        for e in await history(store, AggregateType.AGENT, dead.id)
        if e.name == KernelStarted.event_name
    ]
    running = await interval(engine, kernel_id)
    assert (running.started_at, running.ended_at, running.node_id) == (started, None, dead.id)

    kv = await bus.js.key_value(HEARTBEATS_BUCKET)
    await kv.purge(f"agent.{dead.id}")  # its heartbeat is gone: the node is lost
    await session_in(store, session_id, SessionStatus.TERMINATED)

    async def released() -> list[StoredEvent]:
        node = await history(store, AggregateType.NODE, dead.id)
        return [e for e in node if e.name == ResourcesReleased.event_name]

    (release,) = await eventually(released)
    (allocated,) = [
        ResourcesAllocated.model_validate(e.envelope.payload)
        for e in await history(store, AggregateType.NODE, dead.id)
        if e.name == ResourcesAllocated.event_name
    ]
    await project(engine, bus)  # a restarted projector folds the loss
    ended = await interval(engine, kernel_id)
    assert ended.ended_at == release.envelope.occurred_at
    assert ended.end_reason == "node-lost"

    # A report around it: the kernel's slots for exactly the time it held them.
    micros = (release.envelope.occurred_at - started) // timedelta(microseconds=1)
    assert micros > 0
    (device,) = allocated.devices
    lines = await usage(
        engine, group_by=UsageGroup.USER, start=started - timedelta(hours=1),
        end=started + timedelta(hours=1), now=started + timedelta(hours=2),
        scope=UsageScope(user_id=owner.user_id),
    )  # fmt: skip
    assert lines == [
        UsageLine(
            key=owner.user_id, name=None,
            cpu_core_seconds=NEED.cpu_milli * micros / (1000 * MICROS),
            memory_gib_seconds=micros / MICROS,
            gpu_seconds=NEED.gpu_hundredths * micros / (100 * MICROS),
            devices=(DeviceUsage(dead.id, device.uuid, micros / MICROS,
                                 device.hundredths * micros / (100 * MICROS)),),
            sessions=1,
        )
    ]  # fmt: skip
