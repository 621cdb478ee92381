"""The vfolders view on a real nats-server, on SQLite and on PostgreSQL: folders, shares and
invitations from ``ev.vfolder.*``, live mounts from ``ev.session.*``, listings by scope with
filters and Relay cursors, an owner's total, redelivery changing nothing, and a rebuild equal
to the live view.

The log is shared with the other tests, so each test works in its own domain and with its
own users; each database is the test's own (a file, or a PostgreSQL database made here).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from commands.aggregate import Aggregate
from commands.folders.aggregate import VFolder
from commands.repository import pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore, decode
from events.writes import AggregateRef
from projections.folders import queries as q
from projections.folders import view as vfolders
from projections.folders.queries import Scope
from projections.rebuild import rebuild
from projections.runner import Projector
from schemas.ids import new_id
from schemas.principal import Actor, ActorKind, Tenant
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.vfolder import FolderStatus, Mount, OwnerKind, Permission, UsageMode
from tests.support import NOW

RO, RW, RWD = Permission.READ_ONLY, Permission.READ_WRITE, Permission.READ_WRITE_DELETE


class Log:
    """Writes folders and sessions through their aggregates, in one domain of its own."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        tag = new_id()[:8]
        self.domain = f"d-{tag}"
        self.alice, self.bob, self.carol = (f"u-{n}-{tag}" for n in ("alice", "bob", "carol"))
        self.project = f"p-{tag}"
        self.guards: dict[AggregateRef, int] = {}
        self.clock = NOW

    def now(self) -> Any:
        self.clock += timedelta(seconds=1)
        return self.clock

    async def save(self, aggregate: Aggregate) -> None:
        cause = Cause(
            causation_id=new_id(), correlation_id=new_id(),
            actor=Actor(kind=ActorKind.SERVICE, id="storage"), tenant=Tenant(domain=self.domain),
        )  # fmt: skip
        write = pending_write((aggregate, self.guards.get(aggregate.ref, 0)), cause)
        assert write is not None
        committed = await self.store.append(write)
        self.guards[aggregate.ref] = committed.last_seqs[aggregate.ref]

    async def folder(
        self, name: str, owner: str | None = None, *, kind: OwnerKind = OwnerKind.USER, **kw: Any
    ) -> VFolder:
        folder = VFolder.create(
            new_id(), name, kind, owner or self.alice, self.domain, "local", self.now(), **kw
        )
        await self.save(folder)
        return folder

    async def session(self, *mounted: VFolder, read_only: bool = False) -> Session:
        spec = SessionSpec(
            image="busybox", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.1")),)
        )
        mounts = tuple(
            Mount(folder_id=f.id, name=f.name, volume=f.volume, path=f"/home/work/{f.name}",
                  read_only=read_only)
            for f in mounted
        )  # fmt: skip
        session = Session.request(new_id(), spec, self.now(), mounts=mounts)
        await self.save(session)
        return session


async def caught_up(engine: AsyncEngine, bus: Bus) -> Projector:
    projector = Projector(engine, bus)
    await projector.start()
    await projector.catch_up(timeout=0.5)
    return projector


async def dump(engine: AsyncEngine) -> dict[str, list[Any]]:
    async with engine.connect() as conn:
        return {
            t.name: [tuple(r) for r in await conn.execute(select(t).order_by(*t.primary_key))]
            for t in vfolders.VIEW.metadata("").sorted_tables
        }


async def test_folders_shares_and_usage_follow_the_log(bus: Bus, engine: AsyncEngine) -> None:
    log = Log(EventStore(bus))
    data = await log.folder("data", quota_bytes=1 << 30, usage_mode=UsageMode.DATA)
    data.rename("datasets", log.now())
    data.invite(log.bob, RW, log.now())
    data.invite(log.carol, RO, log.now())
    data.accept(log.bob, log.now())
    data.set_quota(2 << 30, log.now())
    data.measured(1234, 5, log.now(), links=2, others=1)
    await log.save(data)
    gone = await log.folder("gone")
    gone.invite(log.bob, RO, log.now())
    gone.accept(log.bob, log.now())
    gone.measured(99, 1, log.now())
    gone.trash("done", log.now())
    gone.purge("done", log.now())
    await log.save(gone)
    clone = await log.folder("copy", cloned_from=data.id)
    projector = await caught_up(engine, bus)
    try:
        row = await q.get_folder(engine, data.id)
        assert row is not None
        assert (row.name, row.owner_kind, row.owner_id, row.domain, row.volume) == (
            "datasets", OwnerKind.USER, log.alice, log.domain, "local",
        )  # fmt: skip
        assert (row.usage_mode, row.status, row.quota_bytes) == (
            UsageMode.DATA, FolderStatus.READY, 2 << 30,
        )  # fmt: skip
        assert (row.bytes_used, row.files, row.creator) == (1234, 5, "")
        assert (row.links, row.others) == (2, 1)
        assert row.shares == {log.bob: RW} and row.invitations == {log.carol: RO}
        assert row.created_at < row.updated_at
        purged = await q.get_folder(engine, gone.id)
        assert purged is not None and purged.status is FolderStatus.PURGED
        assert (purged.shares, purged.bytes_used, purged.files) == ({}, 0, 0)
        cloning = await q.get_folder(engine, clone.id)
        assert cloning is not None and cloning.status is FolderStatus.CLONING
        assert cloning.cloned_from == data.id

        clone.cloned(4096, 2, log.now(), links=1)
        await log.save(clone)
        data.decline(log.carol, log.now())
        data.trash("", log.now())
        await log.save(data)
        await projector.catch_up(timeout=0.5)
        cloned = await q.get_folder(engine, clone.id)
        assert cloned is not None and (cloned.status, cloned.bytes_used) == (
            FolderStatus.READY,
            4096,
        )
        assert (cloned.files, cloned.links, cloned.others) == (2, 1, 0)
        trashed = await q.get_folder(engine, data.id)
        assert trashed is not None and trashed.status is FolderStatus.TRASHED
        assert trashed.invitations == {}
        # Trashed folders still hold bytes; purged ones hold none.
        assert await q.owner_bytes(engine, OwnerKind.USER, log.alice) == 1234 + 4096

        # The same events again (a redelivered batch) change nothing.
        before = await dump(engine)
        events = await log.store.reader.read_subject(f"ev.vfolder.{data.id}")
        async with engine.begin() as conn:
            await vfolders.apply_batch(conn, "", [decode(m) for m in events])
        assert await dump(engine) == before
    finally:
        await projector.close()


async def test_listings_by_scope_filters_and_cursors(bus: Bus, engine: AsyncEngine) -> None:
    log = Log(EventStore(bus))
    own = [await log.folder(f"mine-{i}") for i in range(3)]
    team = await log.folder("team", log.project, kind=OwnerKind.PROJECT)
    bobs = await log.folder("bobs", log.bob)
    offered = await log.folder("offered", log.bob)
    offered.invite(log.alice, RO, log.now())
    await log.save(offered)
    shared = await log.folder("shared", log.carol)
    shared.invite(log.alice, RW, log.now())
    shared.accept(log.alice, log.now())
    await log.save(shared)
    trashed = await log.folder("old")
    trashed.trash("", log.now())
    trashed.purge("", log.now())
    await log.save(trashed)
    projector = await caught_up(engine, bus)
    try:
        alice = Scope(user_id=log.alice, projects=frozenset({log.project}))
        page = await q.list_folders(engine, scope=alice, first=10)
        ids = [r.id for r in page.rows]
        assert ids == [f.id for f in (*own, team, offered, shared)]
        assert page.total == 6 and not page.has_next and bobs.id not in ids

        first = await q.list_folders(engine, scope=alice, first=4)
        assert [r.id for r in first.rows] == ids[:4] and first.has_next and first.total == 6
        rest = await q.list_folders(engine, scope=alice, first=4, after=first.end_cursor)
        assert [r.id for r in rest.rows] == ids[4:] and not rest.has_next

        projects = await q.list_folders(engine, scope=alice, owner_kind=OwnerKind.PROJECT)
        assert [r.id for r in projects.rows] == [team.id]
        named = await q.list_folders(engine, scope=alice, name="shared")
        assert [r.id for r in named.rows] == [shared.id]
        purged = await q.list_folders(engine, scope=alice, status=FolderStatus.PURGED)
        assert [r.id for r in purged.rows] == [trashed.id]

        # Without projects, a user reaches no project folder.
        bob = await q.list_folders(engine, scope=Scope(user_id=log.bob), first=10)
        assert [r.id for r in bob.rows] == [bobs.id, offered.id]
        domain = await q.list_folders(engine, scope=Scope(domain=log.domain), first=50)
        assert domain.total == 7  # the purged one only when asked
        elsewhere = await q.list_folders(engine, scope=Scope(domain=f"x-{log.domain}"))
        assert elsewhere.rows == [] and elsewhere.total == 0

        by_name = await q.folders_named(engine, "shared", shared_with=log.alice)
        assert [r.id for r in by_name] == [shared.id]
        assert await q.folders_named(engine, "offered", shared_with=log.alice) == []
        mine = await q.folders_named(engine, "mine-1", owners=[(OwnerKind.USER, log.alice)])
        assert [r.id for r in mine] == [own[1].id]
    finally:
        await projector.close()


async def test_mounts_are_live_until_the_session_ends(bus: Bus, engine: AsyncEngine) -> None:
    log = Log(EventStore(bus))
    data, models, idle = [await log.folder(n) for n in ("data", "models", "idle")]
    running = await log.session(data, models)
    cancelled = await log.session(data, read_only=True)
    requeued = await log.session(models)
    projector = await caught_up(engine, bus)
    try:
        mounted = await q.mounted_by(engine, [data.id, models.id, idle.id])
        assert mounted == {
            data.id: sorted([running.id, cancelled.id]),
            models.id: sorted([running.id, requeued.id]),
        }
        cancelled.terminate("user asked", log.now())
        await log.save(cancelled)
        running.fail("image pull failed", log.now())
        await log.save(running)
        await projector.catch_up(timeout=0.5)
        assert await q.mounted_by(engine, [data.id, models.id]) == {models.id: [requeued.id]}
    finally:
        await projector.close()


async def test_a_rebuild_equals_the_live_view(
    bus: Bus, engine: AsyncEngine, database_url: str
) -> None:
    log = Log(EventStore(bus))
    data = await log.folder("data")
    data.invite(log.bob, RW, log.now())
    data.accept(log.bob, log.now())
    await log.save(data)
    session = await log.session(data)
    session.terminate("user asked", log.now())
    await log.save(session)
    await log.session(data)
    live = await caught_up(engine, bus)
    try:
        before = await dump(engine)
        assert await rebuild(database_url, bus, [vfolders.VIEW]) >= live.position
        assert await dump(engine) == before
    finally:
        await live.close()
