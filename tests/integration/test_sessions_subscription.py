"""``sessionsAdded`` on the real gateway and nats-server: a subscriber hears of each session
it may read that is requested after it subscribed, once the views hold it (``session(id)``
answers at once), and of no one else's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from events.bus import Bus
from events.domain.session import SessionRequested
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.support import envelope

ADDED = "subscription { sessionsAdded { id seq } }"
SESSION = "query($id: ID!) { session(id: $id) { id status } }"


@pytest.fixture
async def gateway(bus: Bus, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path) as gw:
        yield gw


async def _request(bus: Bus, owner: SessionOwner) -> str:
    """A session requested by ``owner``, as the scheduler writes it."""
    session_id = new_id()
    spec = SessionSpec(image="i:1", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1")),))
    event = SessionRequested(spec=spec, kernel_ids=(new_id(),), owner=owner)
    ref = AggregateRef(AggregateType.SESSION, session_id)
    env = envelope(ref, 1, name=event.event_name, payload=event.model_dump(mode="json"))
    await EventStore(bus).append(Write.create(ref, env))
    return session_id


async def _added(gateway: Gateway, auth: JetyardAuth, seen: asyncio.Queue[dict[str, Any]]) -> None:
    url = gateway.url.replace("http", "ws") + "/graphql"
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        init = {"type": "connection_init", "payload": auth.connection_params(gateway.host)}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": ADDED}}))
        async for raw in ws:
            message = json.loads(raw)
            assert message["type"] == "next" and not message["payload"].get("errors"), message
            seen.put_nowait(message["payload"]["data"]["sessionsAdded"])


async def test_a_subscriber_hears_of_its_new_sessions_and_no_one_elses(
    bus: Bus, gateway: Gateway
) -> None:
    mine, my_auth, _ = await person(gateway, "ada", "default", "default")
    theirs, _, _ = await person(gateway, "bob", "default", "default")
    before = await _request(bus, mine)  # before the subscription: never told
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    listening = asyncio.create_task(_added(gateway, my_auth, seen))
    try:
        # The subscription follows the log from its end as it was when it began: sessions
        # requested until one is heard of tell that it has begun.
        async with asyncio.timeout(15):
            while seen.empty():
                await _request(bus, mine)
                await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)
        probes = [seen.get_nowait()["id"] for _ in range(seen.qsize())]
        assert before not in probes

        first = await _request(bus, mine)
        await _request(bus, theirs)
        second = await _request(bus, mine)
        told = [await asyncio.wait_for(seen.get(), 15) for _ in range(2)]
        assert [t["id"] for t in told] == [first, second]
        for added in told:  # the views hold it when told
            answer = await gql_ok(gateway, SESSION, auth=my_auth, id=added["id"])
            assert answer["session"]["id"] == added["id"]
        await asyncio.sleep(1.5)
        assert seen.empty()  # bob's was never sent
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
