"""``sessionsAdded`` and ``sessionsChanged`` on the real gateway and nats-server: a subscriber
hears of each session it may read that is requested after it subscribed, once the views hold it
(``session(id)`` answers at once), of every status change and queue move of the sessions it
may read (also those requested before it subscribed), and of no one else's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import websockets

from events.bus import Bus
from events.domain.session import SessionPendingReasonChanged, SessionRequested
from events.queues import QueueBoard
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.sdk import JetyardAuth
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.subscriptions import subscribe
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.integration.poison import HOSTILE, write_hostile
from tests.support import envelope

ADDED = "subscription { sessionsAdded { id seq } }"
SESSION = "query($id: ID!) { session(id: $id) { id status } }"


@pytest.fixture
async def gateway(bus: Bus, tmp_path: Path) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path) as gw:
        yield gw


async def _request(bus: Bus, owner: SessionOwner) -> str:
    """A session requested by ``owner``, as the scheduler writes it."""
    return (await _requested(bus, owner))[0]


async def _requested(bus: Bus, owner: SessionOwner) -> tuple[str, int]:
    """A session requested by ``owner`` (its id and its event's log position)."""
    session_id = new_id()
    spec = SessionSpec(image="i:1", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1")),))
    event = SessionRequested(spec=spec, kernel_ids=(new_id(),), owner=owner)
    ref = AggregateRef(AggregateType.SESSION, session_id)
    env = envelope(ref, 1, name=event.event_name, payload=event.model_dump(mode="json"))
    committed = await EventStore(bus).append(Write.create(ref, env))
    return session_id, committed.seqs[0]


async def _still_waiting(bus: Bus, session_id: str, after_seq: int, reason: str) -> int:
    """The session's second event: PENDING for another reason."""
    ref = AggregateRef(AggregateType.SESSION, session_id)
    event = SessionPendingReasonChanged(reason=reason)
    env = envelope(ref, 2, name=event.event_name, payload=event.model_dump(mode="json"))
    committed = await EventStore(bus).append(Write.after(ref, after_seq, env))
    return committed.seqs[0]


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


CHANGED = """subscription($pending: [ID!], $after: Int) {
  sessionsChanged(pending: $pending, after: $after) {
    changes { id added status reason seq queuePosition queueLength } } }"""


async def _changes(
    gateway: Gateway,
    auth: JetyardAuth,
    seen: asyncio.Queue[dict[str, Any]],
    pending: list[str] | None = None,
    after: int | None = None,
) -> None:
    stream = subscribe(gateway.url, auth, CHANGED, {"pending": pending, "after": after})
    async for data in stream:
        for change in data["sessionsChanged"]["changes"]:
            seen.put_nowait(change)


async def _until(seen: asyncio.Queue[dict[str, Any]], test: Any) -> dict[str, Any]:
    """The first change (of those still to come) that ``test`` accepts."""
    async with asyncio.timeout(15):
        while True:
            change = await seen.get()
            if test(change):
                return change


async def test_one_feed_carries_additions_and_changes_of_mine_only(
    bus: Bus, gateway: Gateway
) -> None:
    mine, my_auth, _ = await person(gateway, "cy", "default", "default")
    theirs, _, _ = await person(gateway, "dee", "default", "default")
    older, older_seq = await _requested(bus, mine)  # before the subscription
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    listening = asyncio.create_task(_changes(gateway, my_auth, seen))
    try:
        # It follows the log from its end as it was when it began: wait until it hears.
        probe = None
        async with asyncio.timeout(15):
            while seen.empty():
                probe = await _request(bus, mine)
                await asyncio.sleep(0.2)
        assert probe is not None
        # A session met in the middle of its life: its owner is looked up, its change sent.
        await _still_waiting(bus, older, older_seq, "fits nowhere: gpu")
        change = await _until(seen, lambda c: c["id"] == older)
        assert change["added"] is False
        assert (change["status"], change["reason"]) == ("PENDING", "fits nowhere: gpu")

        other, other_seq = await _requested(bus, theirs)
        await _still_waiting(bus, other, other_seq, "someone else's")
        new, new_seq = await _requested(bus, mine)
        added = await _until(seen, lambda c: c["id"] in (new, other))
        assert added["id"] == new and added["added"] is True and added["seq"] == new_seq
        # The views hold a session once its addition is told.
        answer = await gql_ok(gateway, SESSION, auth=my_auth, id=new)
        assert answer["session"]["status"] == "PENDING"
        await _still_waiting(bus, new, new_seq, "waits for its turn")
        moved = await _until(seen, lambda c: c["id"] in (new, other))
        assert (moved["id"], moved["reason"], moved["added"]) == (new, "waits for its turn", False)
        await asyncio.sleep(1.0)
        assert all(c["id"] != other for c in [seen.get_nowait() for _ in range(seen.qsize())])
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)


async def test_named_waiting_sessions_get_their_queue_moves(bus: Bus, gateway: Gateway) -> None:
    mine, my_auth, _ = await person(gateway, "eve", "default", "default")
    theirs, _, _ = await person(gateway, "fay", "default", "default")
    first, _ = await _requested(bus, mine)
    second, second_seq = await _requested(bus, mine)
    stranger, _ = await _requested(bus, theirs)
    assert await gateway.services.views.wait_for(second_seq + 1, 10)  # they hold all three
    group = f"rg-{new_id()[:8]}"
    board = QueueBoard.on(bus, min_interval_s=0.0)
    await board.publish(group, [stranger, first, second], 3)
    await board.flush()
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    listening = asyncio.create_task(
        _changes(gateway, my_auth, seen, pending=[first, second, stranger])
    )
    try:
        # First their places now: mine only (someone else's waiting session is not told).
        now: dict[str, dict[str, Any]] = {}
        async with asyncio.timeout(15):
            while len(now) < 2 or any(c["queuePosition"] is None for c in now.values()):
                change = await seen.get()
                now[change["id"]] = change
        assert stranger not in now
        assert {k: (c["queuePosition"], c["queueLength"]) for k, c in now.items()} == {
            first: (2, 3),
            second: (3, 3),
        }
        # The head is placed: both move up, pushed without any event of theirs.
        await board.publish(group, [first, second], 2)
        await board.flush()
        moves: dict[str, tuple[str, int]] = {}
        async with asyncio.timeout(15):
            while len(moves) < 2:
                change = await seen.get()
                moves[change["id"]] = (change["status"], change["queuePosition"])
        assert moves == {first: ("PENDING", 1), second: ("PENDING", 2)}
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        await board.publish(group, [], 0)
        await board.flush()


async def test_a_list_followed_after_its_position_misses_nothing(
    bus: Bus, gateway: Gateway
) -> None:
    mine, my_auth, _ = await person(gateway, "hal", "default", "default")
    listed = await gql_ok(
        gateway, "{ sessions(first: 1, newestFirst: true) { seq } }", auth=my_auth
    )
    seq = listed["sessions"]["seq"]
    # Requested after the list was read, before its follower began: told all the same.
    between, between_seq = await _requested(bus, mine)
    await _still_waiting(bus, between, between_seq, "still waiting")
    seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    listening = asyncio.create_task(_changes(gateway, my_auth, seen, after=seq))
    try:
        told = [await _until(seen, lambda c: c["id"] == between) for _ in range(2)]
        assert [(c["added"], c["reason"]) for c in told] == [
            (True, told[0]["reason"]),
            (False, "still waiting"),
        ]
        assert told[0]["seq"] == between_seq and told[1]["seq"] > between_seq
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)


async def test_hostile_events_on_the_log_are_skipped_not_the_end_of_the_feed(
    bus: Bus, gateway: Gateway
) -> None:
    mine, my_auth, _ = await person(gateway, "ivy", "default", "default")
    listed = await gql_ok(gateway, "{ sessions(first: 1) { seq } }", auth=my_auth)
    for kind in sorted(HOSTILE):  # malformed, misfiled, unreadable owners... between
        await write_hostile(bus, kind)
    after, _ = await _requested(bus, mine)
    for auth in (my_auth, gateway.root):  # an owner looked up, and a superadmin's (no lookup)
        seen: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        stream = _changes(gateway, auth, seen, after=listed["sessions"]["seq"])
        listening = asyncio.create_task(stream)
        try:
            told = await _until(seen, lambda c: c["id"] == after)
            assert told["added"] is True
            assert not listening.done()  # still following
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)


async def test_bad_pending_ids_or_positions_are_refused(gateway: Gateway) -> None:
    _, auth, _ = await person(gateway, "gil", "default", "default")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"pending": [new_id()] * 501}, "at most 500"),
        ({"pending": ["../x"]}, "session id"),
        ({"after": -5}, "log position"),
    ]
    for variables, words in cases:
        with pytest.raises(JetyardError, match=words):
            async for _ in subscribe(gateway.url, auth, CHANGED, variables):
                pass
