"""A request no node of its group could ever hold, through GraphQL with the real scheduler:
refused at creation (code ``too-large``) naming the largest node, or told there are no GPUs;
a group with no node yet refuses nothing; a group that waits for larger nodes takes it, and
its reason (the scheduler's, shown by the API) says what it waits for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.tenancy import GroupScheduling, ScopeKind
from tests.integration.gateway_support import Gateway, person, running_gateway
from tests.integration.scheduler_support import FakeAgent, StartScheduler, eventually, slots
from tests.tenancy_support import associate_group

CREATE = """mutation($input: CreateSessionInput!) {
    createSession(input: $input) { status sessionId message } }"""


@pytest.fixture
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("never-fits")) as gw:
        yield gw


async def node_seen(gateway: Gateway, agent: FakeAgent) -> None:
    async def check() -> bool:
        return any(v.id == agent.id for v in await gateway.services.views.nodes())

    await eventually(check, timeout=10, what=f"node {agent.hostname} in the nodes view")


async def test_too_large_is_refused_unless_the_group_waits_for_larger_nodes(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, gateway: Gateway
) -> None:
    small, waits, empty = (f"rg-{name}-{new_id()[:6]}" for name in ("small", "waits", "empty"))
    for group in (small, empty):
        await associate_group(store, group, ScopeKind.DOMAIN, "default")
    await associate_group(
        store, waits, ScopeKind.DOMAIN, "default", GroupScheduling(wait_for_larger_nodes=True)
    )
    await start_scheduler()
    agents = [FakeAgent(store, slots(cpu=2, mem=2), (image,), group=g) for g in (small, waits)]
    for agent in agents:
        await agent.register()
        await node_seen(gateway, agent)
    _, auth, _ = await person(gateway, "big", "default", "default")

    async def create(group: str, **need: str) -> dict[str, Any]:
        return await gateway.gql(
            CREATE, auth=auth, input={"image": image, "resourceGroup": group, **need}
        )

    eight = await create(small, cpu="8")
    (error,) = eight["errors"]
    assert error["extensions"]["code"] == "too-large"
    assert f"no node in group {small} could ever hold this request" in error["message"]
    assert f"8 CPUs even when idle (largest: 2 CPUs on {agents[0].hostname})" in error["message"]

    half = await create(small, gpu="0.5")
    assert half["errors"][0]["extensions"]["code"] == "too-large"
    assert f"there are no GPUs in group {small} (asked for 0.5 GPU)" in half["errors"][0]["message"]

    # No node in the group yet (as right after `jetyard up`): it is taken, and waits for one.
    early = await create(empty, cpu="8")
    assert "errors" not in early, early

    # The group waits for larger nodes: taken, and its reason says what it waits for.
    waiting = await create(waits, cpu="8")
    assert "errors" not in waiting, waiting
    session_id = waiting["data"]["createSession"]["sessionId"]

    async def reason() -> str | None:
        body = await gateway.gql(
            "query($id: ID!) { session(id: $id) { status statusReason } }", id=session_id
        )
        shown = body["data"]["session"]
        return shown["statusReason"] if shown and "larger node" in shown["statusReason"] else None

    said = await eventually(reason, timeout=10, what="the waiting reason")
    assert said == (
        f"no node in group {waits} has 8 CPUs even when idle "
        f"(largest: 2 CPUs on {agents[1].hostname}); it waits for a larger node to join the group"
    )
