"""Queue positions on a real NATS server: the board in ``jy-queues`` (written as the scheduler
does, read by a second board), ``Session.queuePosition`` through the gateway, and a position
change pushed to a subscriber of a PENDING session."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import websockets

from commands.repository import pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause
from events.queues import QueueBoard
from events.store import EventStore
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import QUEUES_BUCKET
from tests.integration.gateway_support import Gateway, running_gateway
from tests.support import NOW

QUERY = "query($id: ID!) { session(id: $id) { status queuePosition queueLength } }"
WATCH = """subscription($id: ID!) {
    sessionStatus(id: $id) { status seq queuePosition queueLength } }"""


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("queues")) as gw:
        yield gw


@pytest.fixture
async def scheduler_board(bus: Bus) -> AsyncIterator[QueueBoard]:
    """The scheduler's side, with no spacing between writes (tests publish on purpose)."""
    board = QueueBoard.on(bus, min_interval_s=0)
    yield board
    await board.close()


async def _pending_session(bus: Bus, group: str) -> str:
    command = new_id()
    cause = Cause(
        causation_id=command, correlation_id=command, actor=Actor.service("scheduler"),
        tenant=SYSTEM_TENANT,
    )  # fmt: skip
    spec = SessionSpec(
        image="busybox",
        resource_group=group,
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.5", memory=64 << 20)),),
    )
    session = Session.request(new_id(), spec, NOW)
    write = pending_write((session, 0), cause)
    assert write is not None
    await EventStore(bus).append(write)
    return session.id


async def _eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(200):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def test_a_published_queue_is_read_by_another_board_and_not_rewritten(
    bus: Bus, scheduler_board: QueueBoard
) -> None:
    group = f"g-{new_id()[:8]}"
    await scheduler_board.publish(group, ["s1", "s2", "s3"], 7)
    reader = QueueBoard.on(bus)
    await reader.start_watching()
    try:
        assert reader.ready.is_set()
        assert (reader.position("s1"), reader.position("s3")) == ((1, 7), (3, 7))
        kv = await bus.js.key_value(QUEUES_BUCKET)
        revision = (await kv.get(group)).revision
        await scheduler_board.publish(group, ["s1", "s2", "s3"], 7)  # unchanged: not written
        assert (await kv.get(group)).revision == revision
        seen = reader.generation
        await scheduler_board.publish(group, ["s3"], 1)
        await asyncio.wait_for(reader.changed(seen), 5)
        assert (reader.position("s1"), reader.position("s3")) == (None, (1, 1))
        raw = (await kv.get(group)).value
        assert raw is not None and json.loads(raw)["ids"] == ["s3"]
    finally:
        await reader.close()


async def test_the_gateway_answers_positions_and_pushes_a_move_to_a_subscriber(
    bus: Bus, gateway: Gateway, scheduler_board: QueueBoard
) -> None:
    group = f"g-{new_id()[:8]}"
    session_id = await _pending_session(bus, group)
    ahead = new_id()
    await scheduler_board.publish(group, [ahead, session_id], 2)

    async def answered() -> bool:
        found = (await gateway.gql(QUERY, id=session_id))["data"]["session"]
        return bool(found == {"status": "PENDING", "queuePosition": 2, "queueLength": 2})

    await _eventually(answered, "session(id) answers queuePosition 2 of 2")

    url = gateway.url.replace("http", "ws") + "/graphql"
    async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        init = {"type": "connection_init", "payload": gateway.root.connection_params(gateway.host)}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        payload = {"query": WATCH, "variables": {"id": session_id}}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))

        async def next_change() -> dict[str, Any]:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert message["type"] == "next", message
            change: dict[str, Any] = message["payload"]["data"]["sessionStatus"]
            return change

        first = await next_change()
        assert (first["status"], first["queuePosition"], first["queueLength"]) == ("PENDING", 2, 2)
        # Someone joins behind it: its position is the same, so nothing is pushed...
        await scheduler_board.publish(group, [ahead, session_id, new_id()], 3)
        # ...and the one ahead is placed: it moves up, and that is pushed.
        await scheduler_board.publish(group, [session_id], 2)
        moved = await next_change()
        assert moved == {
            "status": "PENDING", "seq": first["seq"], "queuePosition": 1, "queueLength": 2,
        }  # fmt: skip
        await ws.send(json.dumps({"id": "1", "type": "complete"}))
