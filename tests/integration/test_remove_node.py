"""Removing a node through GraphQL, decided by the real scheduler: refused while the ledger
holds a kernel, then ``NodeRemoved``; the node leaves ``nodes``, its agent's registrations
change nothing on the ledger, and operators' commands on it are refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from commands.node.aggregate import Node
from commands.repository import load, pending_write
from events.bus import Bus
from events.domain.node import NodeRemoved
from events.envelope import Cause
from events.store import EventStore
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.subjects import AggregateType
from tests.integration.gateway_support import Gateway, running_gateway
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    eventually,
    history,
    node_of,
    now,
    slots,
)

NODES = "{ nodes { id } }"


@pytest.fixture
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("remove")) as gw:
        yield gw


async def remove(gateway: Gateway, node_id: str) -> dict[str, object]:
    return await gateway.gql(
        'mutation($id: ID!) { removeNode(id: $id, reason: "retired") { status message } }',
        id=node_id,
    )


async def held(store: EventStore, node_id: str, kernel_id: str, *, give_back: bool) -> None:
    """A kernel on the ledger (or given back), written as the scheduler would."""
    loaded = await load(store, Node, node_id)
    node = loaded.aggregate
    assert node is not None
    if give_back:
        node.release(kernel_id, "ended", now())
    else:
        node.allocate(kernel_id, "s-" + kernel_id, slots(cpu=1, mem=1), now())
    cause = Cause(
        causation_id=new_id(), correlation_id=new_id(), actor=Actor.service("tests"),
        tenant=SYSTEM_TENANT,
    )  # fmt: skip
    write = pending_write(loaded, cause)
    assert write is not None
    await store.append(write)


async def test_a_node_is_removed_once_empty_and_its_agent_is_ignored(
    store: EventStore, start_scheduler: StartScheduler, gateway: Gateway
) -> None:
    scheduler = await start_scheduler()
    agent = FakeAgent(store, slots(cpu=8, mem=8), ())
    await agent.register()
    await node_of(store, agent)
    kernel_id = new_id()
    await held(store, agent.id, kernel_id, give_back=False)

    async def refused() -> dict[str, object] | None:
        answer = await remove(gateway, agent.id)
        return answer if answer.get("errors") else None

    busy = await eventually(refused)
    error = busy["errors"][0]  # type: ignore[index]
    assert error["extensions"]["code"] == "conflict"
    assert "still holds 1 kernel(s): drain it first" in error["message"]

    await held(store, agent.id, kernel_id, give_back=True)

    async def removed() -> dict[str, object] | None:
        answer = await remove(gateway, agent.id)
        return None if answer.get("errors") else answer

    done = await eventually(removed)
    assert done["data"]["removeNode"]["status"] == "ACCEPTED"  # type: ignore[index]
    assert "removed from the cluster" in done["data"]["removeNode"]["message"]  # type: ignore[index]
    events = await history(store, AggregateType.NODE, agent.id)
    assert events[-1].envelope.name == NodeRemoved.event_name

    async def gone() -> bool:
        rows = (await gateway.gql(NODES))["data"]["nodes"]
        return all(r["id"] != agent.id for r in rows)

    await eventually(gone)
    again = await remove(gateway, agent.id)
    assert "was removed already" in again["data"]["removeNode"]["message"]  # type: ignore[index]
    cordon = await gateway.gql("mutation($id: ID!) { cordonNode(id: $id) { status } }", id=agent.id)
    assert "was removed from the cluster" in cordon["errors"][0]["message"]

    # Its agent registers again (other hardware): the ledger records nothing more.
    last = events[-1].seq
    await agent.register(epoch=2, capacity=slots(cpu=16, mem=16))
    await scheduler.settle()  # folded and decided: a pass saw the registration
    after = await history(store, AggregateType.NODE, agent.id)
    assert after[-1].seq == last
