"""Projections on a real nats-server, on SQLite and on PostgreSQL: rows and history from the log,
redelivery and restart change nothing, a rebuild equals the live view, pagination and filters
(status, and the owner's domain and user, as the gateway's role-scoped listings use them).

The log is shared with the other tests, so each test works in its own tenant domain and each
database is the test's own (a file, or a PostgreSQL database created and dropped here).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import inspect, select
from sqlalchemy.ext.asyncio import AsyncEngine

from commands.agent import Agent
from commands.aggregate import Aggregate
from commands.node import Node
from commands.repository import pending_write
from commands.session import Session
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from events.tail import Tail
from events.writes import AggregateRef
from projections import app, queries
from projections.base import positions
from projections.db import writing
from projections.queries import NodeView, decode_cursor
from projections.rebuild import rebuild, rebuild_views, swap
from projections.runner import Projector, ViewVersionError
from projections.settings import ProjectionSettings
from projections.views import VIEWS
from schemas.ids import new_id, node_id_for_host
from schemas.principal import Actor, ActorKind, Tenant
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionStatus
from schemas.settings import NatsSettings
from schemas.subjects import EVENTS_STREAM
from schemas.tenancy import SessionOwner
from services.gateway import node_views
from services.gateway.node_views import NodeViews
from services.gateway.sqlviews import SqlViews
from tests.integration.leftovers import consumer_names
from tests.support import NOW

CAPACITY = ResourceSlots(cpu_milli=16_000, memory_bytes=64 * 2**30, gpu_hundredths=400)
SLOTS = ResourceSlots(cpu_milli=2000, memory_bytes=4 * 2**30, gpu_hundredths=100)


class Cluster:
    """Writes through the real aggregates and the event store, in one tenant domain."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.domain = f"d-{new_id()[:8]}"
        self.guards: dict[AggregateRef, int] = {}
        self.seqs: list[int] = []
        self.clock = NOW
        self.owner = self.user("alice")

    def user(self, name: str) -> SessionOwner:
        """Someone in this cluster's domain, with ids unique to the test."""
        tag = new_id()[:8]
        return SessionOwner(
            access_key=f"AK{name}{tag}", user_id=f"u-{name}-{tag}", project_id="p1",
            domain=self.domain,
        )  # fmt: skip

    async def save(self, aggregate: Aggregate) -> None:
        cause = Cause(
            causation_id=new_id(),
            correlation_id=new_id(),
            actor=Actor(kind=ActorKind.USER, id="alice"),
            tenant=Tenant(domain=self.domain, project="p1"),
        )
        write = pending_write((aggregate, self.guards.get(aggregate.ref, 0)), cause)
        assert write is not None
        committed = await self.store.append(write)
        self.guards[aggregate.ref] = committed.last_seqs[aggregate.ref]
        self.seqs.extend(committed.seqs)

    def now(self) -> Any:
        self.clock += timedelta(seconds=1)
        return self.clock

    async def node(self) -> Node:
        host = f"host-{new_id()}"
        agent = Agent.register(
            node_id_for_host(host), epoch=1, hostname=host, backend="simulated",
            capacity=CAPACITY, images=("busybox",), now=self.now(),
        )  # fmt: skip
        await self.save(agent)
        node = Node.register(node_id_for_host(host), host, "default", CAPACITY, self.now())
        await self.save(node)
        return node

    async def session(
        self,
        name: str | None = None,
        owner: SessionOwner | None = None,
        *,
        legacy: bool = False,
        admit: bool = False,
    ) -> Session:
        """A session of ``owner`` (alice if not given), or one from before tenancy (no owner)."""
        spec = SessionSpec(image="busybox", kernels=(KernelSpec(resources=SLOTS),), name=name)
        whose = None if legacy else owner or self.owner
        session = Session.request(new_id(), spec, self.now(), owner=whose)
        if admit:
            session.admit("admitted", self.now())
        await self.save(session)
        return session

    async def place(self, session: Session, node: Node) -> None:
        kernel = session.kernel_ids[0]
        session.schedule({kernel: node.id}, "placed", self.now())
        node.allocate(kernel, session.id, SLOTS, self.now(), image="busybox")
        await self.save(session)
        await self.save(node)

    async def end(self, session: Session, node: Node, exit_code: int) -> None:
        kernel = session.kernel_ids[0]
        session.terminate("user asked", self.now())
        node.request_stop(kernel, "terminating", self.now())
        await self.save(session)
        await self.save(node)
        session.kernel_exited(kernel, exit_code, "kernel exited", self.now())
        node.release(kernel, "session ended", self.now())
        await self.save(session)
        await self.save(node)


async def scenario(cluster: Cluster) -> dict[str, Any]:
    """Two nodes (one cordoned), a finished, a cancelled and a running session."""
    n1, n2 = await cluster.node(), await cluster.node()
    n2.cordon("maintenance", cluster.now())
    await cluster.save(n2)
    done, cancelled, running = [await cluster.session(f"s{i}", admit=i != 1) for i in range(3)]
    await cluster.place(done, n1)
    done.kernel_started(done.kernel_ids[0], cluster.now())
    await cluster.save(done)
    await cluster.end(done, n1, exit_code=3)
    cancelled.note_pending_reason("fits nowhere: gpu", cluster.now())
    cancelled.terminate("user asked", cluster.now())
    await cluster.save(cancelled)
    await cluster.place(running, n1)
    running.begin_preparing("pulling image", cluster.now())
    running.kernel_started(running.kernel_ids[0], cluster.now())
    await cluster.save(running)
    return {"n1": n1, "n2": n2, "done": done, "cancelled": cancelled, "running": running}


async def dump(engine: AsyncEngine, *, with_positions: bool = True) -> dict[str, list[Any]]:
    """Every row of every view table (and the positions), in primary-key order."""
    tables = [t for v in VIEWS for t in v.metadata("").sorted_tables]
    if with_positions:
        tables.append(positions)
    async with engine.connect() as conn:
        return {
            t.name: [tuple(r) for r in await conn.execute(select(t).order_by(*t.primary_key))]
            for t in tables
        }


async def caught_up(engine: AsyncEngine, bus: Bus) -> Projector:
    projector = Projector(engine, bus)
    await projector.start()
    await projector.catch_up(timeout=0.5)
    return projector


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
            SessionStatus.TERMINATED, "kernel exited", 3,
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
            (SessionStatus.TERMINATED, "kernel exited"),
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


def by_id(views: list[NodeView]) -> dict[str, NodeView]:
    return {v.id: v for v in views}


async def test_every_node_s_view_is_read_whole_when_many_moved(
    bus: Bus, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Cluster(EventStore(bus))
    await scenario(cluster)
    projector = await caught_up(engine, bus)
    try:
        monkeypatch.setattr(node_views, "MANY_IDS", 0)  # every node "many": no id list
        kept = NodeViews(engine)
        assert by_id(await kept.all()) == by_id(await queries.list_nodes(engine))
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
        assert running.history[-1].reason == "kernel exited"
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


async def test_sessions_page_by_request_order_with_a_status_filter(
    bus: Bus, engine: AsyncEngine
) -> None:
    cluster = Cluster(EventStore(bus))
    made = await scenario(cluster)
    extra = [await cluster.session(f"x{i}") for i in range(4)]
    projector = await caught_up(engine, bus)
    await projector.close()
    everything = [made["done"], made["cancelled"], made["running"], *extra]

    seen: list[str] = []
    after = None
    while True:
        page = await queries.list_sessions(engine, first=3, after=after, domain=cluster.domain)
        seen += [r.record.id for r in page.rows]
        assert page.cursors == [r.cursor for r in page.rows]
        if not page.has_next:
            break
        after = page.end_cursor
    assert seen == [s.id for s in everything]

    pending = await queries.list_sessions(
        engine, first=10, status=SessionStatus.PENDING, domain=cluster.domain
    )
    assert [r.record.id for r in pending.rows] == [s.id for s in extra]
    assert not pending.has_next
    ended = await queries.list_sessions(
        engine,
        first=1,
        status=["TERMINATED", "CANCELLED"],
        domain=cluster.domain,
        with_history=True,
    )
    assert [r.record.id for r in ended.rows] == [made["done"].id] and ended.has_next
    assert ended.rows[0].history[-1].status is SessionStatus.TERMINATED
    rest = await queries.list_sessions(
        engine,
        first=5,
        after=ended.end_cursor,
        status=["TERMINATED", "CANCELLED"],
        domain=cluster.domain,
    )
    assert [r.record.id for r in rest.rows] == [made["cancelled"].id] and not rest.has_next
    assert decode_cursor(ended.rows[0].cursor) == ended.rows[0].record.created_seq
    with pytest.raises(ValueError, match="cursor"):
        await queries.list_sessions(engine, after="bm9wZQ==")

    # Newest first: the same sessions the other way round, paged by cursors of that order,
    # which the oldest-first order refuses (and the other way round).
    newest: list[str] = []
    after = None
    while True:
        page = await queries.list_sessions(
            engine, first=3, after=after, domain=cluster.domain, newest_first=True
        )
        newest += [r.record.id for r in page.rows]
        if not page.has_next:
            break
        after = page.end_cursor
    assert newest == [s.id for s in reversed(everything)]
    with pytest.raises(ValueError, match="cursor"):
        await queries.list_sessions(engine, after=after)
    with pytest.raises(ValueError, match="cursor"):
        await queries.list_sessions(engine, after=rest.end_cursor, newest_first=True)


async def test_sessions_page_by_owner_domain_and_user_and_legacy_ones_match_neither(
    bus: Bus, engine: AsyncEngine
) -> None:
    cluster = Cluster(EventStore(bus))
    alice, bob = cluster.owner, cluster.user("bob")
    # Interleaved, so that every page boundary falls between someone else's sessions.
    whose = [alice, bob, None, alice, bob, alice, None]
    made = [
        await cluster.session(f"o{i}", o, legacy=o is None, admit=i == 0)
        for i, o in enumerate(whose)
    ]
    projector = await caught_up(engine, bus)
    await projector.close()

    async def walk(first: int, **filters: Any) -> list[str]:
        seen: list[str] = []
        after = None
        while True:
            page = await queries.list_sessions(engine, first=first, after=after, **filters)
            seen += [r.record.id for r in page.rows]
            if not page.has_next:
                return seen
            after = page.end_cursor

    def ids(*owners: SessionOwner) -> list[str]:
        return [s.id for s, o in zip(made, whose, strict=True) if o in owners]

    assert await walk(2, domain=cluster.domain) == ids(alice, bob)
    assert await walk(1, user_id=alice.user_id) == ids(alice)
    assert await walk(2, domain=cluster.domain, user_id=bob.user_id) == ids(bob)
    assert await walk(5, domain=cluster.domain, user_id="nobody") == []
    # Sessions from before tenancy have no owner: only an unfiltered listing holds them.
    everything = await walk(500, project_id="p1")
    assert set(ids(alice, bob)) <= set(everything) and made[2].id not in everything
    first = await queries.get_session(engine, made[0].id)
    legacy = await queries.get_session(engine, made[2].id)
    assert first is not None and legacy is not None
    assert (first.record.admitted, first.record.status_reason) == (True, "admitted")
    assert (legacy.record.domain, legacy.record.user_id, legacy.record.admitted) == (
        None, None, True,
    )  # fmt: skip

    # The gateway's read side answers the same query type: the same filters, the owner on
    # every row, the history with it, and cursors that carry on under them.
    views = SqlViews(engine)
    page = await views.sessions(first=2, after=None, status="PENDING", user_id=alice.user_id)
    assert [r.record.id for r in page.rows] == ids(alice)[:2] and page.has_next
    rest = await views.sessions(
        first=2, after=page.cursors[-1], status="PENDING", user_id=alice.user_id
    )
    assert [r.record.id for r in rest.rows] == ids(alice)[2:] and not rest.has_next
    row = page.rows[0].record
    assert (row.access_key, row.user_id, row.project_id, row.domain) == (
        alice.access_key, alice.user_id, "p1", cluster.domain,
    )  # fmt: skip
    assert (row.priority, row.admitted, page.rows[1].record.admitted) == (10, True, False)
    assert [h.status for h in page.rows[0].history] == [SessionStatus.PENDING] * 2
    by_domain = await views.sessions(first=10, after=None, status=None, domain=cluster.domain)
    assert [r.record.id for r in by_domain.rows] == ids(alice, bob)
    assert {r.record.user_id for r in by_domain.rows} == {alice.user_id, bob.user_id}


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
    later = await cluster.session("after-rebuild")
    assert await queries.wait_for_position(engine, cluster.seqs[-1], timeout=10.0)
    stop.set()
    await service
    assert await queries.get_session(engine, later.id) is not None
    assert await queries.get_session(engine, made["done"].id) is not None
    followed = await dump(engine)
    version = next(v.version for v in VIEWS if v.name == "sessions")
    assert ("sessions", version, cluster.seqs[-1]) in followed["projection_positions"]
    await rebuild(database_url, bus)
    assert await dump(engine) == followed
