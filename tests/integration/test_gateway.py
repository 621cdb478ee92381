"""The GraphQL gateway over uvicorn, on the real log and real views (no scheduler here: these
tests write session events themselves and check what the API makes of them)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import websockets

from commands.asyncapi import build_document
from commands.repository import load, pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode, KernelSpec, SessionSpec, SessionType
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
    counted = await gateway.gql('{ sessions(first: 1, status: "PENDING") { totalCount } }')
    assert counted["data"]["sessions"]["totalCount"] == len(seen)  # every page's rows

    newest = """query($after: String) { sessions(first: 1, after: $after, newestFirst: true) {
        edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }"""
    top: list[str] = []
    after = None
    for _ in range(3):  # the newest three: this test's own, the last one first
        page = (await gateway.gql(newest, after=after))["data"]["sessions"]
        top += [e["node"]["id"] for e in page["edges"]]
        after = page["pageInfo"]["endCursor"]
    assert top == ids[::-1]
    wrong = await gateway.gql(query, after=after)  # a newest-first cursor, oldest-first asked
    assert "cursor" in wrong["errors"][0]["message"]
    assert wrong["errors"][0]["extensions"]["code"] == "invalid"  # refused input, not a bug
    garbage = await gateway.gql(query, after="x" * 5000)
    assert garbage["errors"][0]["extensions"]["code"] == "invalid"
    assert len(garbage["errors"][0]["message"]) < 100


async def test_bad_input_is_a_clear_error_and_sends_nothing(bus: Bus, gateway: Gateway) -> None:
    before = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    mutation = (
        """mutation($input: CreateSessionInput!) { createSession(input: $input) { status } }"""
    )
    negative = await gateway.gql(mutation, input={"image": "busybox", "memory": "-1g"})
    assert negative["errors"][0]["message"] == "memory must not be negative, got '-1g'"
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


async def test_a_batch_cluster_session_shows_its_fields_and_result(
    bus: Bus, gateway: Gateway
) -> None:
    store = EventStore(bus)
    dependency = await _new_session(store, "first")
    starts = NOW.replace(microsecond=0)
    spec = SessionSpec(
        image="busybox",
        type=SessionType.BATCH,
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.5", memory=64 << 20)),) * 2,
        cluster_mode=ClusterMode.MULTI_NODE,
        depends_on=(dependency,),
        starts_at=starts,
        timeout_s=90,
    )
    session = Session.request(new_id(), spec, NOW)
    main, sub = session.kernel_ids
    session.schedule({main: "node-1", sub: "node-2"}, "placed", NOW)
    for kernel in (main, sub):
        session.kernel_started(kernel, NOW)
    session.kernel_exited(sub, 1, "kernel exited with code 1", NOW)
    session.kernel_exited(main, 0, "kernel exited with code 0", NOW)
    write = pending_write((session, 0), _cause())
    assert write is not None
    seq = (await store.append(write)).seqs[-1]
    assert await gateway.services.views.wait_for(seq, 10)

    query = """query($id: ID!) { session(id: $id) { status exitCode result dependsOn startsAt
        timeoutSeconds clusterMode clusterSize kernelIds history { status reason }
        resources { cpu memoryBytes gpu } resourcesPerKernel { cpu memoryBytes gpu } } }"""
    shown = (await gateway.gql(query, id=session.id))["data"]["session"]
    # The total is every kernel's together; each kernel's share is said apart.
    assert shown["resources"] == {"cpu": "1", "memoryBytes": str(128 << 20), "gpu": "0"}
    assert shown["resourcesPerKernel"] == {"cpu": "0.5", "memoryBytes": str(64 << 20), "gpu": "0"}
    assert shown["status"] == "TERMINATED"
    # The main kernel's exit is the session's result, whatever the sub-kernel did.
    assert (shown["exitCode"], shown["result"]) == (0, "success")
    assert shown["dependsOn"] == [dependency]
    assert shown["startsAt"] == starts.isoformat()
    assert (shown["timeoutSeconds"], shown["clusterMode"], shown["clusterSize"]) == (
        90,
        "multi-node",
        2,
    )
    assert [h["status"] for h in shown["history"]] == [
        "PENDING",
        "SCHEDULED",
        "RUNNING",
        "TERMINATED",
    ]
    assert shown["history"][-1]["reason"] == "main1: kernel exited with code 0"


async def test_bad_batch_input_is_a_clear_error_and_sends_nothing(
    bus: Bus, gateway: Gateway
) -> None:
    before = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    mutation = (
        """mutation($input: CreateSessionInput!) { createSession(input: $input) { status } }"""
    )
    interactive = await gateway.gql(mutation, input={"image": "busybox", "timeoutSeconds": 60})
    assert interactive["errors"][0]["message"] == (
        "timeoutSeconds applies to batch sessions only (type: batch)"
    )
    too_big = await gateway.gql(mutation, input={"image": "busybox", "clusterSize": 65})
    assert too_big["errors"][0]["message"] == "clusterSize must be 1 to 64 kernels, got 65"
    twice = await gateway.gql(
        mutation, input={"image": "busybox", "type": "batch", "dependsOn": ["s-1", "s-1"]}
    )
    assert "dependency 's-1' is named more than once" in twice["errors"][0]["message"]
    assert (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq == before


async def test_the_asyncapi_document_needs_a_signed_in_caller(gateway: Gateway) -> None:
    anonymous = await gateway.client.get(f"{gateway.url}/asyncapi.json")
    signed = await gateway.client.get(f"{gateway.url}/asyncapi.json", auth=gateway.root)
    forged = await gateway.client.get(
        f"{gateway.url}/asyncapi.json", headers={"Authorization": "Bearer forged"}
    )

    assert anonymous.status_code == 401
    assert signed.status_code == 200
    assert signed.json() == build_document()
    assert "x-ratelimit-limit" in signed.headers  # limited like every request
    assert forged.status_code == 401  # credentials, when given, must be good ones
