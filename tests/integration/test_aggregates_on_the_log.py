"""Aggregates written to and loaded from the real log: races, upcasting, snapshots."""

from __future__ import annotations

import asyncio

from commands.agent import Agent
from commands.errors import DomainError
from commands.node.aggregate import Node
from commands.node.rules import InsufficientCapacityError
from commands.repository import load, pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause, Envelope
from events.snapshots import SnapshotStore
from events.store import EventStore
from events.writes import AggregateRef, ConcurrencyConflict, Write
from schemas.ids import new_id, node_id_for_host
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionStatus
from schemas.subjects import AggregateType
from tests.support import NOW

SCHEDULER = Actor.service("scheduler")


def cause() -> Cause:
    command = new_id()
    return Cause(
        causation_id=command, correlation_id=command, actor=SCHEDULER, tenant=SYSTEM_TENANT
    )


async def create_session(store: EventStore) -> str:
    spec = SessionSpec(image="busybox", kernels=(KernelSpec(resources=ResourceSlots()),))
    session = Session.request(new_id(), spec, NOW)
    write = pending_write((session, 0), cause())
    assert write is not None
    await store.append(write)
    return session.id


async def _decide(
    store: EventStore, session_id: str, action: str, both_loaded: asyncio.Barrier, lost: list[str]
) -> str:
    """Load, decide, append; after losing a race, reload and decide again."""
    first = True
    while True:
        loaded = await load(store, Session, session_id)
        if first:
            await both_loaded.wait()  # both writers decide from the same version
            first = False
        session = loaded.aggregate
        assert session is not None
        try:
            if action == "schedule":
                session.schedule({session.kernel_ids[0]: "node-1"}, "placed", NOW)
            else:
                session.terminate("user request", NOW)
        except DomainError as refused:
            return f"{action} refused: {refused}"
        write = pending_write(loaded, cause())
        assert write is not None
        try:
            await store.append(write)
            return f"{action} stored"
        except ConcurrencyConflict:
            lost.append(action)


async def test_schedule_and_terminate_racing_on_one_session(bus: Bus) -> None:
    """Both decide from the same version; exactly one is stored first, and the loser reloads
    and decides again on what is now true."""
    store = EventStore(bus)
    for _ in range(5):
        session_id = await create_session(store)
        lost: list[str] = []
        barrier = asyncio.Barrier(2)
        outcomes = await asyncio.gather(
            _decide(store, session_id, "schedule", barrier, lost),
            _decide(store, session_id, "terminate", barrier, lost),
        )
        assert len(lost) == 1  # exactly one writer lost the race
        final = (await load(store, Session, session_id)).aggregate
        assert final is not None
        if lost == ["terminate"]:
            # Terminate lost, reloaded a SCHEDULED session and asked it to stop.
            assert list(outcomes) == ["schedule stored", "terminate stored"]
            assert final.status == SessionStatus.TERMINATING
        else:
            # Schedule lost: the session had been cancelled while pending.
            assert outcomes[1] == "terminate stored"
            assert outcomes[0].startswith("schedule refused")
            assert final.status == SessionStatus.CANCELLED


async def test_two_schedulers_cannot_hand_out_the_same_capacity(bus: Bus) -> None:
    store = EventStore(bus)
    node_id = node_id_for_host(f"gpu-{new_id()}.lab.example")
    node = Node.register(node_id, "gpu-host", "default", ResourceSlots.of(cpu=8, gpu=2), NOW)
    write = pending_write((node, 0), cause())
    assert write is not None
    await store.append(write)
    want = ResourceSlots.of(cpu=4, gpu="1.5")

    async def allocate(kernel: str) -> str:
        while True:
            loaded = await load(store, Node, node_id)
            assert loaded.aggregate is not None
            try:
                loaded.aggregate.allocate(kernel, f"s-{kernel}", want, NOW)
            except InsufficientCapacityError as exc:
                return f"refused: {exc}"
            write = pending_write(loaded, cause())
            assert write is not None
            try:
                await store.append(write)
                return "allocated"
            except ConcurrencyConflict:
                continue

    results = await asyncio.gather(*(allocate(f"k{i}") for i in range(4)))
    assert results.count("allocated") == 1
    assert all("not enough free gpu" in r for r in results if r != "allocated")
    final = (await load(store, Node, node_id)).aggregate
    assert final is not None and len(final.allocations) == 1
    assert final.free == ResourceSlots.of(cpu=4, gpu="0.5")


async def test_a_v1_event_in_the_log_is_upcast_before_the_domain_sees_it(bus: Bus) -> None:
    store = EventStore(bus)
    agent = AggregateRef(AggregateType.AGENT, new_id())
    v1 = Envelope(
        event_id=new_id(),
        name="AgentRegistered",
        schema_version=1,
        aggregate_type=agent.type,
        aggregate_id=agent.id,
        aggregate_version=1,
        occurred_at=NOW,
        causation_id="old",
        correlation_id="old",
        actor=Actor.service("agent"),
        tenant=SYSTEM_TENANT,
        payload={"epoch": 1, "hostname": "h", "capacity": {"cpu_milli": 1000}, "images": []},
    )
    await store.append(Write.create(agent, v1))
    history = await store.read(agent)
    assert history.events[0].envelope.schema_version == 2
    assert history.events[0].envelope.payload["backend"] == "docker"
    loaded = (await load(store, Agent, agent.id)).aggregate
    assert loaded is not None and loaded.backend == "docker" and loaded.epoch == 1


async def test_loading_from_a_snapshot_reads_only_the_tail(bus: Bus) -> None:
    store, snapshots = EventStore(bus), await SnapshotStore.open(bus)
    node_id = new_id()
    node = Node.register(node_id, "h", "default", ResourceSlots.of(cpu=64), NOW)
    seq = 0
    for i in range(40):
        node.allocate(f"k{i}", f"s{i}", ResourceSlots.of(cpu=1), NOW)
        if i % 2:
            node.release(f"k{i - 1}", "ended", NOW)
        write = pending_write((node, seq), cause())
        assert write is not None
        seq = (await store.append(write)).last_seqs[write.aggregate]
        if i == 29:
            await snapshots.save(node.snapshot(seq, NOW))
    replayed = (await load(store, Node, node_id)).aggregate
    before = store.reader.requests
    from_snapshot = await load(store, Node, node_id, snapshots)
    assert store.reader.requests - before == 1
    assert from_snapshot.last_seq == seq
    assert from_snapshot.aggregate is not None and replayed is not None
    assert from_snapshot.aggregate.state() == replayed.state()
    assert from_snapshot.aggregate.version == replayed.version
