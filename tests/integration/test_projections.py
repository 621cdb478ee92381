"""Projections on a real nats-server, on SQLite and on PostgreSQL: rows and history from the log,
redelivery and restart change nothing, a rebuild equals the live view, and the service rebuilds
a view of another version before it follows.

The log is shared with the other tests, so each test works in its own tenant domain and each
database is the test's own (a file, or a PostgreSQL database created and dropped here).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from sqlalchemy import inspect, select
from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from events.store import EventStore
from events.tail import Tail
from jetyard.runtime.natsserver import NatsServer
from projections import app, queries
from projections.base import positions
from projections.db import writing
from projections.rebuild import rebuild, rebuild_views, swap
from projections.runner import Projector, ViewVersionError
from projections.settings import ProjectionSettings
from projections.views import VIEWS
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus
from schemas.settings import NatsSettings
from schemas.subjects import EVENTS_STREAM
from services.gateway.core.node_views import NodeViews
from tests.integration.leftovers import consumer_names
from tests.integration.projection_support import (
    CAPACITY,
    SLOTS,
    Cluster,
    by_id,
    caught_up,
    dump,
    scenario,
)
from tests.nats_support import bus_with_streams, nats_server_in, settings_of


# This module's tests rebuild views from the whole log: on a nats-server of their own, the log
# is this module's events, not every earlier test's (on the shared one a rebuild read thousands,
# the poison ones quarantined one by one, and took 20-30 s).
@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server_in(tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="module")
def nats_settings(nats_server: NatsServer) -> NatsSettings:
    return settings_of(nats_server)


@pytest.fixture(scope="module")
async def bus(nats_settings: NatsSettings) -> AsyncIterator[Bus]:
    async with bus_with_streams(nats_settings, "tests-projections") as connected:
        yield connected


async def test_views_follow_the_log_and_redelivery_changes_nothing(
    bus: Bus, engine: AsyncEngine
) -> None:
    cluster = Cluster(EventStore(bus))
    made = await scenario(cluster)
    projector = await caught_up(engine, bus)
    try:
        assert await projector.caught_up()
        done = await queries.get_session(engine, made["done"].id)
        assert done is not None
        row = done.record
        assert (row.status, row.status_reason, row.exit_code) == (
            SessionStatus.TERMINATED, "user asked", 3,  # asked to end: the cause stays
        )  # fmt: skip
        assert (row.name, row.project, row.owner_id) == ("s0", "p1", "alice")
        owner = cluster.owner
        assert (row.access_key, row.user_id, row.project_id, row.domain) == (
            owner.access_key, owner.user_id, owner.project_id, cluster.domain,
        )  # fmt: skip
        assert (row.priority, row.admitted) == (10, True)
        assert (row.cpu_milli, row.gpu_hundredths, row.node_ids) == (2000, 100, (made["n1"].id,))
        assert [(h.status, h.reason) for h in done.history] == [
            (SessionStatus.PENDING, "requested"),
            (SessionStatus.PENDING, "admitted"),
            (SessionStatus.SCHEDULED, "placed"),
            (SessionStatus.RUNNING, "kernel started"),
            (SessionStatus.TERMINATING, "user asked"),
            (SessionStatus.TERMINATED, "user asked"),
        ]
        assert [h.seq for h in done.history] == sorted(h.seq for h in done.history)
        cancelled = await queries.get_session(engine, made["cancelled"].id)
        assert cancelled is not None and not cancelled.record.admitted
        assert [(h.status, h.reason) for h in cancelled.history] == [
            (SessionStatus.PENDING, "requested"),
            (SessionStatus.PENDING, "fits nowhere: gpu"),
            (SessionStatus.CANCELLED, "user asked"),
        ]
        nodes = {n.id: n for n in await queries.list_nodes(engine)}
        n1, n2 = nodes[made["n1"].id], nodes[made["n2"].id]
        assert (n1.used, n1.allocations, n1.cordoned, n1.backend, n1.epoch) == (
            SLOTS,
            1,
            False,
            "simulated",
            1,
        )
        assert (n2.used, n2.allocations, n2.cordoned, n2.reason) == (
            ResourceSlots(),
            0,
            True,
            "maintenance",
        )
        assert n1.images == ("busybox",) and n1.capacity == CAPACITY

        before = await dump(engine)
        # The same events again, as a redelivered batch (skipped by position) ...
        tail = Tail(bus, from_seq=cluster.seqs[0])
        again = []
        while tail.position < cluster.seqs[-1]:
            again += await tail.fetch(timeout=0.5)
        await tail.close()
        assert await projector.apply_batch(again, cluster.seqs[-1]) == 0
        assert await dump(engine) == before
        # ... and straight into the views, past the positions: each row's last seq holds.
        async with writing(engine) as conn:
            for view in VIEWS:
                await view.apply_batch(conn, "", [e for e in again if e.name in view.events])
        assert await dump(engine) == before
    finally:
        await projector.close()


async def test_a_restart_applies_only_what_came_after_the_stored_position(
    bus: Bus, engine: AsyncEngine
) -> None:
    cluster = Cluster(EventStore(bus))
    made = await scenario(cluster)
    first = await caught_up(engine, bus)
    stopped_at = first.position
    await first.close()

    kept = NodeViews(engine)  # the gateway's copy: stamps first, whole rows of what moved
    assert by_id(await kept.all()) == by_id(await queries.list_nodes(engine))

    cluster.seqs.clear()
    await cluster.end(made["running"], made["n1"], exit_code=0)
    later = await cluster.session("late")

    second = Projector(engine, bus)
    try:
        assert await second.start() == stopped_at
        applied = 0
        while second.position < cluster.seqs[-1]:
            applied += await second.step(timeout=0.5)
        assert applied == len(cluster.seqs)  # every new event once, nothing older again
        running = await queries.get_session(engine, made["running"].id)
        assert running is not None and running.record.status is SessionStatus.TERMINATED
        assert running.history[-1].reason == "user asked"
        assert await queries.get_session(engine, later.id) is not None
        n1 = next(n for n in await queries.list_nodes(engine) if n.id == made["n1"].id)
        assert (n1.used, n1.allocations) == (ResourceSlots(), 0)
        now = await kept.all()
        assert by_id(now) == by_id(await queries.list_nodes(engine))  # n1's release seen
        assert [(v.resource_group, v.hostname) for v in now] == sorted(
            (v.resource_group, v.hostname) for v in now
        )
        assert await queries.position(engine) == second.position
        assert await queries.wait_for_position(engine, cluster.seqs[-1], timeout=1.0)
        assert not await queries.wait_for_position(engine, second.position + 10**9, timeout=0.1)

        # Read-your-writes while the projector follows the log.
        stop = asyncio.Event()
        following = asyncio.create_task(second.run(stop, timeout=0.2))
        newest = await cluster.session("newest")
        assert await second.wait_for(cluster.seqs[-1], timeout=5.0)
        assert await queries.get_session(engine, newest.id) is not None
        assert not await second.wait_for(cluster.seqs[-1] + 10**9, timeout=0.1)
        stop.set()
        await following
    finally:
        await second.close()


async def test_a_rebuild_equals_the_live_view(
    bus: Bus, engine: AsyncEngine, database_url: str
) -> None:
    cluster = Cluster(EventStore(bus))
    made = await scenario(cluster)
    live = await caught_up(engine, bus)
    before = await dump(engine)
    # What an interrupted rebuild leaves behind is dropped by the next one.
    interrupted = Projector(engine, bus, suffix="__r0badf00d")
    await interrupted.start()
    await interrupted.close()
    try:
        assert await rebuild(database_url, bus) == live.position
        assert await dump(engine) == before
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: inspect(c).get_table_names())
            keys = (await conn.execute(select(positions.c.view))).scalars().all()
        assert not [n for n in names if "__r" in n] and sorted(keys) == sorted(
            v.name for v in VIEWS
        )

        # A rebuild swapped in *behind* a running projector: the projector reads again from
        # the swapped-in position, so the events in between are not lost.
        shadow = Projector(engine, bus, suffix="__r0000beef")
        await shadow.start()
        await shadow.catch_up(timeout=0.5)
        await shadow.close()
        await cluster.end(made["running"], made["n1"], exit_code=0)
        await live.catch_up(timeout=0.5)
        await swap(engine, VIEWS, "__r0000beef", shadow)
        assert await queries.position(engine) < live.position
        await live.catch_up(timeout=0.5)
        running = await queries.get_session(engine, made["running"].id)
        assert running is not None and running.record.status is SessionStatus.TERMINATED
        caught = await dump(engine)
        await rebuild(database_url, bus)
        assert await dump(engine) == caught
    finally:
        await live.close()


async def test_the_service_rebuilds_a_view_of_another_version_then_follows(
    bus: Bus, engine: AsyncEngine, database_url: str, nats_settings: NatsSettings
) -> None:
    cluster = Cluster(EventStore(bus))
    made = await scenario(cluster)
    settings = ProjectionSettings(database_url=database_url, fetch_timeout_s=0.2)
    assert await rebuild_views(settings, nats_settings) == 0
    # As if older code had built "sessions": the service must rebuild it before following.
    async with writing(engine) as conn:
        await conn.execute(
            positions.update().where(positions.c.view == "sessions").values(version=0)
        )
    readers = await consumer_names(bus, EVENTS_STREAM)
    with pytest.raises(ViewVersionError):
        await Projector(engine, bus).start()
    assert await consumer_names(bus, EVENTS_STREAM) <= readers  # a refused start reads nothing
    stop = asyncio.Event()
    service = asyncio.create_task(app.run(settings, nats_settings, stop))
    try:
        later = await cluster.session("after-rebuild")
        # The rebuild reads the whole shared log (every earlier test's events, the poison
        # ones quarantined one by one): generous, as a loaded CI machine needs.
        assert await queries.wait_for_position(engine, cluster.seqs[-1], timeout=60.0)
    finally:
        stop.set()  # a failure must not leave the service reading into the next module
        await service
    assert await queries.get_session(engine, later.id) is not None
    assert await queries.get_session(engine, made["done"].id) is not None
    followed = await dump(engine)
    version = next(v.version for v in VIEWS if v.name == "sessions")
    assert ("sessions", version, cluster.seqs[-1]) in followed["projection_positions"]
    await rebuild(database_url, bus)
    assert await dump(engine) == followed
