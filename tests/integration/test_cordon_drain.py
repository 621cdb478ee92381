"""Cordon, drain and uncordon through GraphQL, decided by the real scheduler: a cordoned node
takes no new session, a drain with a deadline stops what still runs there, and ``nodes``
shows each node's state and reason."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from events.bus import Bus
from events.store import EventStore
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus
from schemas.tenancy import SessionOwner
from tests.integration.gateway_support import Gateway, running_gateway
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

NEED = ResourceSlots(cpu_milli=1000, memory_bytes=64 << 20)
NODES = "{ nodes { id state reason cordoned allocations } }"


@pytest.fixture
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("nodes")) as gw:
        yield gw


async def node_row(gateway: Gateway, node_id: str, state: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        rows = (await gateway.gql(NODES))["data"]["nodes"]
        row = next((r for r in rows if r["id"] == node_id), None)
        return row if row is not None and row["state"] == state else None

    return await eventually(check)


async def request(bus: Bus, image: str, owner: SessionOwner) -> str:
    return await requested(bus, image, owner, NEED)


async def test_cordon_then_uncordon(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, gateway: Gateway
) -> None:
    owner = (await make_tenancy(store)).owner
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await agent.register()
    await node_of(store, agent)
    cordon = await gateway.gql(
        'mutation($id: ID!) { cordonNode(id: $id, reason: "disk check") { status message } }',
        id=agent.id,
    )
    assert cordon["data"]["cordonNode"]["status"] == "ACCEPTED", cordon
    row = await node_row(gateway, agent.id, "cordoned")
    assert row["reason"] == "disk check"
    waiting = await request(bus, image, owner)
    pending = await session_in(store, waiting, SessionStatus.PENDING)
    assert pending.spec.image == image  # placed nowhere: the only node is cordoned
    await gateway.gql("mutation($id: ID!) { uncordonNode(id: $id) { status } }", id=agent.id)
    await node_row(gateway, agent.id, "schedulable")
    await session_in(store, waiting, SessionStatus.SCHEDULED)


async def test_a_drain_with_a_deadline_stops_what_still_runs(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, gateway: Gateway
) -> None:
    owner = (await make_tenancy(store)).owner
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=8, mem=8), (image,))
    await agent.register()
    await node_of(store, agent)
    session_id = await request(bus, image, owner)
    placed = await session_in(store, session_id, SessionStatus.SCHEDULED)
    (kernel_id,) = placed.kernel_ids
    await agent.started(kernel_id, session_id)
    await session_in(store, session_id, SessionStatus.RUNNING)
    drain = await gateway.gql(
        'mutation($id: ID!) { drainNode(id: $id, reason: "kernel upgrade", '
        "deadlineSeconds: 1) { status message } }",
        id=agent.id,
    )
    assert drain["data"]["drainNode"]["status"] == "ACCEPTED", drain
    row = await node_row(gateway, agent.id, "draining")
    assert row["reason"].startswith("draining: kernel upgrade")
    stopping = await session_in(store, session_id, SessionStatus.TERMINATING)
    assert "drain deadline" in stopping.reason
    await agent.exited(kernel_id, 143)
    await session_in(store, session_id, SessionStatus.TERMINATED)
    await node_row(gateway, agent.id, "drained")
    refused = await gateway.gql(
        'mutation { drainNode(id: "no-such-node", deadlineSeconds: -1) { status } }'
    )
    assert refused["errors"][0]["extensions"]["code"] == "invalid"
