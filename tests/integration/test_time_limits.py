"""Time limits through the real scheduler: a keypair policy's lifetime limit ends a running
session and a resource group's pending timeout cancels a waiting one, each with its reason,
by timers rebuilt from the log (a scheduler restarted past the deadline still ends it)."""

from __future__ import annotations

import asyncio

from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus, SessionType
from schemas.tenancy import GroupScheduling, KeypairPolicyLimits, SessionOwner
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    node_of,
    requested,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy

NEED = ResourceSlots(cpu_milli=500, memory_bytes=64 << 20)


async def request(bus: Bus, image: str, owner: SessionOwner, group: str = "default") -> str:
    return await requested(bus, image, owner, NEED, type=SessionType.BATCH, resource_group=group)


async def test_a_running_session_ends_at_its_keypairs_lifetime_limit(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    limits = KeypairPolicyLimits(max_session_lifetime_s=1)
    owner = (await make_tenancy(store, limits=limits)).owner
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await agent.register()
    await node_of(store, agent)
    session_id = await request(bus, image, owner)
    session = await session_in(store, session_id, SessionStatus.SCHEDULED)
    (kernel_id,) = session.kernel_ids
    await agent.started(kernel_id, session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    ending = await session_in(store, session_id, SessionStatus.TERMINATING)
    assert "lifetime limit" in ending.reason and "1s" in ending.reason
    await agent.exited(kernel_id, 143)
    await session_in(store, session_id, SessionStatus.TERMINATED)


async def test_a_waiting_session_is_cancelled_at_its_groups_pending_timeout_even_after_a_restart(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    group = f"rg-{new_id()[:8]}"
    tenancy = await make_tenancy(
        store, resource_group=group, scheduling=GroupScheduling(pending_timeout_s=2)
    )
    first = await start_scheduler()
    await FakeAgent(store, slots(cpu=8, mem=8), (image,)).register()  # the image is known
    # No node in the session's group: it waits.
    session_id = await request(bus, image, tenancy.owner, group)
    await session_in(store, session_id, SessionStatus.PENDING)
    await first.stop()  # gone before the deadline: the next one finds it in the log
    await asyncio.sleep(2.2)
    await start_scheduler()
    cancelled = await session_in(store, session_id, SessionStatus.CANCELLED)
    assert f"resource group {group}'s pending timeout (2s)" in cancelled.reason
