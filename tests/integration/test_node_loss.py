"""Node loss through the real scheduler: an agent whose heartbeat key goes (expired or
deleted) has its node declared lost, its sessions ended ``node-lost`` with their slots and
quota given back, and no new placement; a node without a key when the scheduler starts is
swept after the grace; an agent that registers again is taken back; a batch session that
asked for it is requeued on a live node instead."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from commands.node.aggregate import Node
from commands.quota import Quota
from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus
from events.store import EventStore
from events.writes import AggregateRef
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus, SessionType
from schemas.subjects import HEARTBEATS_BUCKET, AggregateType
from schemas.tenancy import ScopeKind, SessionOwner, quota_id_for
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    eventually,
    node_of,
    requested,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy

NEED = ResourceSlots(cpu_milli=4000, memory_bytes=1 << 30)


async def beat(bus: Bus, agent: FakeAgent) -> None:
    kv = await bus.js.key_value(HEARTBEATS_BUCKET)
    await kv.put(f"agent.{agent.id}", json.dumps({"agent_id": agent.id, "epoch": 1}).encode())


async def gone(bus: Bus, agent: FakeAgent) -> None:
    kv = await bus.js.key_value(HEARTBEATS_BUCKET)
    await kv.purge(f"agent.{agent.id}")  # what the server's expiry marker says too


async def request(bus: Bus, image: str, owner: SessionOwner) -> str:
    return await requested(bus, image, owner, NEED)


@dataclass
class Cluster:
    """A session RUNNING on ``dead`` (whose heartbeat the test will take away) and a second,
    live node."""

    owner: SessionOwner
    session_id: str
    kernel_id: str
    dead: FakeAgent
    live: FakeAgent


async def running_on_a_node_to_lose(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, **fields: Any
) -> Cluster:
    owner = (await make_tenancy(store)).owner
    dead = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await dead.register()
    await beat(bus, dead)
    await start_scheduler(watch_heartbeats=True)
    await node_of(store, dead)
    session_id = await requested(bus, image, owner, NEED, **fields)
    (kernel_id,) = (await session_in(store, session_id, SessionStatus.SCHEDULED)).kernel_ids
    await dead.started(kernel_id, session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    live = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await live.register()
    await beat(bus, live)
    await node_of(store, live)
    return Cluster(owner, session_id, kernel_id, dead, live)


async def test_a_dead_node_ends_its_sessions_and_takes_no_more_work(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    cluster = await running_on_a_node_to_lose(bus, store, image, start_scheduler)
    owner, first, dead, live = cluster.owner, cluster.session_id, cluster.dead, cluster.live

    await gone(bus, dead)
    ended = await session_in(store, first, SessionStatus.TERMINATED)
    assert ended.reason.startswith("node-lost") and dead.hostname in ended.reason

    async def lost() -> Node | None:
        node = (await load(store, Node, dead.id)).aggregate
        return node if node is not None and node.lost and not node.allocations else None

    assert (await eventually(lost)).free == slots(cpu=8, mem=8)  # capacity back

    async def quota_back() -> bool:
        quota = await load(store, Quota, quota_id_for(ScopeKind.KEYPAIR, owner.access_key))
        held = quota.aggregate
        return held is not None and first not in held.reserved

    await eventually(quota_back)
    # New sessions go to the live node only (the dead one is emptier, and lost).
    for _ in range(2):
        session_id = await request(bus, image, owner)
        session = await session_in(store, session_id, SessionStatus.SCHEDULED)
        assert set(session.placements.values()) == {live.id}

    # The agent comes back (it fenced, then registers under a new epoch): work again.
    await dead.register(epoch=2)
    await beat(bus, dead)

    async def recovered() -> Node | None:
        node = (await load(store, Node, dead.id)).aggregate
        return node if node is not None and not node.lost else None

    await eventually(recovered)


async def test_a_node_without_a_heartbeat_at_start_is_swept(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    silent = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await silent.register()
    first = await start_scheduler()  # not watching: it opens the ledger only
    await node_of(store, silent)
    await first.stop()
    await start_scheduler(watch_heartbeats=True, sweep_after_s=0.3)

    async def lost() -> Node | None:
        node = (await load(store, Node, silent.id)).aggregate
        return node if node is not None and node.lost else None

    await eventually(lost)
    history = await store.read(AggregateRef(AggregateType.NODE, silent.id))
    (loss,) = [e.envelope for e in history.events if e.name == "NodeLost"]
    assert "heartbeat expired" in loss.payload["reason"]


async def test_a_batch_session_that_asked_for_it_is_requeued_on_a_live_node(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    cluster = await running_on_a_node_to_lose(
        bus, store, image, start_scheduler, type=SessionType.BATCH, requeue_on_node_loss=True
    )
    owner, session_id, dead, live = cluster.owner, cluster.session_id, cluster.dead, cluster.live
    old_kernel = cluster.kernel_id

    await gone(bus, dead)

    async def placed_again() -> Session | None:
        session = (await load(store, Session, session_id)).aggregate
        return (
            session
            if session is not None
            and session.attempt == 1
            and (session.status is SessionStatus.SCHEDULED)
            else None
        )

    session = await eventually(placed_again)
    (new_kernel,) = session.kernel_ids
    assert new_kernel != old_kernel and session.placements == {new_kernel: live.id}
    statuses = [(h.status, h.reason) for h in session.history]
    requeue = [r for s, r in statuses if s is SessionStatus.PENDING and "node-lost" in r]
    assert requeue and "last known: running" in requeue[0] and "requeue 1 of 3" in requeue[0]
    quota = await load(store, Quota, quota_id_for(ScopeKind.KEYPAIR, owner.access_key))
    assert quota.aggregate is not None and session_id in quota.aggregate.reserved
