"""The GraphQL gateway over uvicorn, on the real log and real views (no scheduler here: these
tests write session events themselves and check what the API makes of them)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import websockets

from commands.repository import load, pending_write
from commands.session import Session
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import COMMANDS_STREAM
from tests.integration.gateway_support import Gateway, running_gateway
from tests.support import NOW

ACTOR = Actor.service("scheduler")


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(
        bus, tmp_path_factory.mktemp("gateway"), command_timeout_s=0.5
    ) as gw:
        yield gw


def _cause() -> Cause:
    command = new_id()
    return Cause(causation_id=command, correlation_id=command, actor=ACTOR, tenant=SYSTEM_TENANT)


async def _new_session(store: EventStore, name: str) -> str:
    spec = SessionSpec(
        image="busybox",
        name=name,
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.5", memory=64 << 20)),),
    )
    session = Session.request(new_id(), spec, NOW)
    write = pending_write((session, 0), _cause())
    assert write is not None
    await store.append(write)
    return session.id


async def _advance(store: EventStore, session_id: str, step: str) -> int:
    loaded = await load(store, Session, session_id)
    session = loaded.aggregate
    assert session is not None
    if step == "schedule":
        session.schedule({session.kernel_ids[0]: "node-1"}, "placed on node-1", NOW)
    elif step == "start":
        session.kernel_started(session.kernel_ids[0], NOW)
    else:
        session.kernel_exited(session.kernel_ids[0], 0, "exited", NOW)
    write = pending_write(loaded, _cause())
    assert write is not None
    return (await store.append(write)).seqs[-1]


async def _healthy(gateway: Gateway) -> None:
    for _ in range(100):
        if (await gateway.client.get(f"{gateway.url}/healthz")).status_code == 200:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the gateway never reported caught up")


async def test_sessions_are_paged_with_their_history(bus: Bus, gateway: Gateway) -> None:
    store = EventStore(bus)
    tag = new_id()[:8]
    ids = [await _new_session(store, f"s{i}-{tag}") for i in range(3)]
    await _advance(store, ids[0], "schedule")
    await _healthy(gateway)

    session = (
        await gateway.gql(
            "query($id: ID!) { session(id: $id) { name status history { status reason } } }",
            id=ids[0],
        )
    )["data"]["session"]
    assert session["name"] == f"s0-{tag}"
    assert session["status"] == "SCHEDULED"
    assert [h["status"] for h in session["history"]] == ["PENDING", "SCHEDULED"]
    assert session["history"][1]["reason"] == "placed on node-1"

    query = """query($after: String) { sessions(first: 1, after: $after, status: "PENDING") {
        edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }"""
    seen: list[str] = []
    after = None
    for _ in range(1000):
        page = (await gateway.gql(query, after=after))["data"]["sessions"]
        seen += [e["node"]["id"] for e in page["edges"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert ids[1] in seen and ids[2] in seen and ids[0] not in seen
    assert seen.index(ids[1]) < seen.index(ids[2])


async def test_bad_input_is_a_clear_error_and_sends_nothing(bus: Bus, gateway: Gateway) -> None:
    before = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    mutation = (
        """mutation($input: CreateSessionInput!) { createSession(input: $input) { status } }"""
    )
    negative = await gateway.gql(mutation, input={"image": "busybox", "memory": "-1g"})
    assert negative["errors"][0]["message"] == "memory must be more than zero, got '-1g'"
    typo = await gateway.gql(mutation, input={"image": "busybox", "gpus": "1"})
    assert "gpus" in typo["errors"][0]["message"]
    bad_type = await gateway.gql(mutation, input={"image": "busybox", "type": "daemon"})
    assert "interactive or batch" in bad_type["errors"][0]["message"]
    assert (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq == before


async def test_the_subscription_streams_status_changes_in_order(bus: Bus, gateway: Gateway) -> None:
    store = EventStore(bus)
    session_id = await _new_session(store, "watched")
    url = gateway.url.replace("http", "ws") + "/graphql"
    received: list[tuple[str, int]] = []
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        init = {"type": "connection_init", "payload": gateway.root.connection_params(gateway.host)}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        query = "subscription($id: ID!) { sessionStatus(id: $id) { status seq reason } }"
        payload = {"query": query, "variables": {"id": session_id}}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
        first = json.loads(await asyncio.wait_for(ws.recv(), 10))
        received.append(
            (
                first["payload"]["data"]["sessionStatus"]["status"],
                first["payload"]["data"]["sessionStatus"]["seq"],
            )
        )
        for step in ("schedule", "start", "exit"):
            await _advance(store, session_id, step)
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message["type"] == "complete":
                break
            change = message["payload"]["data"]["sessionStatus"]
            received.append((change["status"], change["seq"]))
    assert [s for s, _ in received] == ["PENDING", "SCHEDULED", "RUNNING", "TERMINATED"]
    seqs = [q for _, q in received]
    assert seqs == sorted(set(seqs))
