"""The API's own doors, through a real gateway on the real log: the official introspection
query (what GraphiQL sends) is answered to a signed-in caller and refused to an anonymous one;
an operation over the wrong transport is a clear error, not ``internal``; a read made as soon
as a subscription told of a change sees that change; ``/livez`` stays 200 under a burst of
creates while ``/readyz`` and ``/healthz`` say whether the views are caught up; a client
closing its connection is no ERROR in the log."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
import websockets
from graphql import get_introspection_query

from events.bus import Bus
from events.catalogue import Event
from events.domain.session import SessionRequested, SessionStarted, SessionTerminated
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.sdk import JetyardAuth
from jetyard.sdk.subscriptions import subscribe
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.gateway.app import WEBSOCKETS
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.support import envelope

STATUS = "subscription($id: ID!) { sessionStatus(id: $id) { status seq } }"
SESSION = "query($id: ID!) { session(id: $id) { status exitCode } }"
FULL_INTROSPECTION = get_introspection_query(
    descriptions=True,
    specified_by_url=True,
    directive_is_repeatable=True,
    schema_description=True,
    input_value_deprecation=True,
)


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    # WebSockets served as the gateway serves them (``app.WEBSOCKETS``).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uvicorn, "Config", functools.partial(uvicorn.Config, ws=WEBSOCKETS))
        async with running_gateway(bus, tmp_path_factory.mktemp("doors")) as gw:
            yield gw


def _ws_url(gateway: Gateway) -> str:
    return gateway.url.replace("http", "ws") + "/graphql"


@pytest.mark.parametrize("query", [get_introspection_query(), FULL_INTROSPECTION])
async def test_the_official_introspection_query_is_answered_to_a_signed_in_caller(
    gateway: Gateway, query: str
) -> None:
    signed = await gateway.client.post(
        f"{gateway.url}/graphql",
        json={"query": query, "operationName": "IntrospectionQuery"},
        auth=gateway.root,
    )
    assert signed.status_code == 200, signed.text
    body = signed.json()
    assert "errors" not in body, body["errors"]
    names = {t["name"] for t in body["data"]["__schema"]["types"]}
    assert {"Query", "Mutation", "Subscription", "Session"} <= names
    anonymous = await gateway.client.post(f"{gateway.url}/graphql", json={"query": query})
    assert anonymous.status_code == 401
    assert anonymous.json()["errors"][0]["extensions"]["code"] == "unauthenticated"


async def test_introspection_that_nests_or_repeats_without_end_is_still_refused(
    gateway: Gateway,
) -> None:
    nested = "".join("fields { type { " for _ in range(3)) + "name" + " } }" * 3
    deep = await gateway.gql(f'{{ __type(name: "Query") {{ {nested} }} }}')
    assert deep["errors"][0]["message"] == "Maximum introspection depth exceeded"
    # Within that depth, the answer's size is what is priced: fifteen whole schemas are not.
    whole = "{ types { ...FullType } directives { name locations args { ...InputValue } } }"
    copies = " ".join(f"s{i}: __schema {whole}" for i in range(15))
    fragments = FULL_INTROSPECTION[FULL_INTROSPECTION.index("fragment FullType") :]
    wide = await gateway.gql(f"query Wide {{ {copies} }}\n{fragments}")
    error = wide["errors"][0]["message"]
    assert error.startswith("Wide's introspection would cost "), wide
    assert "(the limit is 100000)" in error


async def test_a_subscription_over_http_is_told_to_use_a_websocket(gateway: Gateway) -> None:
    query = 'subscription { sessionStatus(id: "nothing-here") { status } }'
    posted = await gateway.client.post(
        f"{gateway.url}/graphql", json={"query": query}, auth=gateway.root
    )
    got = await gateway.client.get(
        f"{gateway.url}/graphql", params={"query": query}, auth=gateway.root
    )
    for answer in (posted, got):
        assert answer.status_code == 400, answer.text
        error = answer.json()["errors"][0]
        assert error["extensions"]["code"] == "wrong-transport"
        assert "graphql-transport-ws" in error["message"]


async def test_a_mutation_over_get_is_told_to_post(gateway: Gateway) -> None:
    query = 'mutation { destroySession(id: "nothing-here") { id } }'
    answer = await gateway.client.get(
        f"{gateway.url}/graphql", params={"query": query}, auth=gateway.root
    )
    assert answer.status_code == 405, answer.text
    error = answer.json()["errors"][0]
    assert error["extensions"]["code"] == "wrong-transport"
    assert "POST" in error["message"]


async def test_a_query_over_a_websocket_is_answered(gateway: Gateway) -> None:
    """graphql-transport-ws carries queries and mutations too: not a wrong transport."""
    async with websockets.connect(_ws_url(gateway), subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        init = {"type": "connection_init", "payload": gateway.root.connection_params(gateway.host)}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        query = {"query": "{ __typename }"}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": query}))
        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert message["type"] == "next", message
        assert message["payload"]["data"] == {"__typename": "Query"}


SPEC = SessionSpec(image="i:1", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1")),))
ORDER = ["PENDING", "RUNNING", "TERMINATED"]


async def _append(bus: Bus, ref: AggregateRef, version: int, after: int, event: Event) -> int:
    """``event`` as the session's ``version``-th, as the scheduler or an agent writes it,
    after its event at log position ``after`` (ignored for the first); its log position."""
    env = envelope(ref, version, name=event.event_name, payload=event.model_dump(mode="json"))
    write = Write.create(ref, env) if version == 1 else Write.after(ref, after, env)
    return (await EventStore(bus).append(write)).seqs[0]


def _requested(owner: SessionOwner) -> SessionRequested:
    return SessionRequested(spec=SPEC, kernel_ids=(new_id(),), owner=owner)


async def _subscribed(gateway: Gateway, auth: JetyardAuth, session_id: str) -> Any:
    """A WebSocket following ``sessionStatus(session_id)`` (the caller closes it)."""
    ws = await websockets.connect(_ws_url(gateway), subprotocols=["graphql-transport-ws"])  # type: ignore[list-item]
    init = {"type": "connection_init", "payload": auth.connection_params(gateway.host)}
    await ws.send(json.dumps(init))
    assert json.loads(await ws.recv())["type"] == "connection_ack"
    payload = {"query": STATUS, "variables": {"id": session_id}}
    await ws.send(json.dumps({"id": "s", "type": "subscribe", "payload": payload}))
    return ws


async def _told(ws: Any) -> str:
    message = json.loads(await asyncio.wait_for(ws.recv(), 15))
    assert message["type"] == "next", message
    status: str = message["payload"]["data"]["sessionStatus"]["status"]
    return status


async def test_a_read_right_after_a_status_event_sees_that_event(
    bus: Bus, gateway: Gateway
) -> None:
    owner, auth, _ = await person(gateway, "reader", "default", "default")
    for _ in range(5):
        ref = AggregateRef(AggregateType.SESSION, new_id())
        seq = await _append(bus, ref, 1, 0, _requested(owner))
        later: list[Event] = [
            SessionStarted(reason="its kernel started"),
            SessionTerminated(reason="kernel exited with code 3", exit_code=3),
        ]
        ws = await _subscribed(gateway, auth, ref.id)
        try:
            for version, expected in enumerate(ORDER, start=1):
                assert await _told(ws) == expected
                # Read at once, on another connection: the views hold at least what was told.
                read = (await gql_ok(gateway, SESSION, id=ref.id))["session"]
                assert read is not None, f"told {expected}, but session(id) says no such session"
                assert ORDER.index(read["status"]) >= ORDER.index(expected), (expected, read)
                if later:  # the next change, written while the subscriber listens
                    seq = await _append(bus, ref, version + 1, seq, later.pop(0))
            assert read == {"status": "TERMINATED", "exitCode": 3}
        finally:
            await ws.close()


CHANGED = """subscription($after: Int) { sessionsChanged(after: $after) {
  changes { id status seq } } }"""


async def test_a_read_right_after_a_list_change_sees_that_change(
    bus: Bus, gateway: Gateway
) -> None:
    owner, auth, _ = await person(gateway, "lister", "default", "default")
    ref = AggregateRef(AggregateType.SESSION, new_id())
    seq = await _append(bus, ref, 1, 0, _requested(owner))
    later: list[Event] = [
        SessionStarted(reason="its kernel started"),
        SessionTerminated(reason="kernel exited with code 3", exit_code=3),
    ]
    told: list[str] = []
    stream = subscribe(gateway.url, auth, CHANGED, {"after": seq - 1})
    try:
        async with asyncio.timeout(15):
            async for data in stream:
                for change in data["sessionsChanged"]["changes"]:
                    if change["id"] != ref.id:
                        continue
                    told.append(change["status"])
                    read = (await gql_ok(gateway, SESSION, id=ref.id))["session"]
                    assert read is not None, f"told {told[-1]}, but no such session"
                    assert ORDER.index(read["status"]) >= ORDER.index(told[-1]), (told, read)
                    if later:
                        seq = await _append(bus, ref, len(told) + 1, seq, later.pop(0))
                if told[-1:] == ["TERMINATED"]:
                    break
    finally:
        await stream.aclose()
    assert told == ORDER


async def _create(bus: Bus, owner: SessionOwner) -> None:
    """A session created (requested, then started): the log grows, the views have work."""
    ref = AggregateRef(AggregateType.SESSION, new_id())
    seq = await _append(bus, ref, 1, 0, _requested(owner))
    await _append(bus, ref, 2, seq, SessionStarted(reason="its kernel started"))


async def test_livez_stays_200_under_a_burst_of_creates(bus: Bus, gateway: Gateway) -> None:
    owner, _, _ = await person(gateway, "burst", "default", "default")
    statuses: list[int] = []
    stop = asyncio.Event()

    async def probe() -> None:
        while not stop.is_set():
            statuses.append((await gateway.client.get(f"{gateway.url}/livez")).status_code)
            await asyncio.sleep(0.02)

    probing = asyncio.create_task(probe())
    try:
        await asyncio.gather(*(_create(bus, owner) for _ in range(300)))
        for _ in range(20):  # while the views fold the burst
            statuses.append((await gateway.client.get(f"{gateway.url}/livez")).status_code)
    finally:
        stop.set()
        await probing
    assert len(statuses) >= 20 and set(statuses) == {200}
    # Once the burst is folded, ready and healthy again (each waits a moment for the views).
    async with asyncio.timeout(20):
        while (await gateway.client.get(f"{gateway.url}/readyz")).status_code != 200:  # noqa: ASYNC110
            await asyncio.sleep(0.1)
    health = await gateway.client.get(f"{gateway.url}/healthz")
    assert health.status_code == 200
    assert health.json()["views_position"] >= health.json()["log_end"]


async def test_ready_and_healthy_do_not_flap_under_ordinary_load(
    bus: Bus, gateway: Gateway
) -> None:
    owner, _, _ = await person(gateway, "steady", "default", "default")
    ready: list[int] = []
    healthy: list[int] = []
    for _ in range(12):  # about 4 creates a second, each probe read right after one
        await _create(bus, owner)
        ready.append((await gateway.client.get(f"{gateway.url}/readyz")).status_code)
        healthy.append((await gateway.client.get(f"{gateway.url}/healthz")).status_code)
        await asyncio.sleep(0.25)
    assert set(ready) == {200} and set(healthy) == {200}, (ready, healthy)


@contextlib.contextmanager
def _errors_logged() -> Iterator[list[logging.LogRecord]]:
    """Every record at ERROR or above, from any logger (uvicorn's do not reach the root)."""
    found: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.ERROR:
                found.append(record)

    handler = Keep()
    loggers = [logging.getLogger(), *(logging.getLogger(n) for n in ("uvicorn", "uvicorn.error"))]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield found
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


async def test_a_client_closing_its_connection_is_not_logged_as_an_error(
    bus: Bus, gateway: Gateway
) -> None:
    owner, auth, _ = await person(gateway, "leaver", "default", "default")
    with _errors_logged() as errors:
        for leave in ("close", "abort"):
            ref = AggregateRef(AggregateType.SESSION, new_id())
            seq = await _append(bus, ref, 1, 0, _requested(owner))
            ws = await _subscribed(gateway, auth, ref.id)
            assert await _told(ws) == "PENDING"
            # Its last change: the client leaves on hearing it (as the CLI does) while the
            # gateway sends `complete`.
            ended = SessionTerminated(reason="kernel exited with code 0", exit_code=0)
            await _append(bus, ref, 2, seq, ended)
            assert await _told(ws) == "TERMINATED"
            if leave == "close":
                await ws.close()
            else:
                ws.transport.abort()
            # And one that leaves while its subscription waits for the next change.
            ref = AggregateRef(AggregateType.SESSION, new_id())
            await _append(bus, ref, 1, 0, _requested(owner))
            ws = await _subscribed(gateway, auth, ref.id)
            assert await _told(ws) == "PENDING"
            ws.transport.abort()
        # An HTTP client that leaves before its answer.
        with contextlib.suppress(httpx.TimeoutException):
            await gateway.client.post(
                f"{gateway.url}/graphql",
                json={"query": "{ sessions(first: 500) { edges { node { id status } } } }"},
                auth=auth,
                timeout=0.001,
            )
        await asyncio.sleep(2.0)  # the subscriptions' next reads find their clients gone
    assert [r.getMessage() for r in errors] == []
