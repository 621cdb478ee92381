"""Reading the log in order (Tail) and folding state from it (Fold) on a real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import cast

import pytest
from nats.aio.msg import Msg

import events.fold
from events.bus import Bus, connect, ensure_streams
from events.direct import RawMessage
from events.envelope import StoredEvent
from events.fold import Fold, FoldedState
from events.follower import Follower
from events.store import EventStore, decode
from events.tail import LONG_POLL_S, PULL_PREFIX, Tail
from events.writes import AggregateRef, Write
from jetyard.runtime.natsserver import NatsServer, free_port
from schemas.settings import NatsSettings
from schemas.subjects import EVENTS_STREAM, AggregateType
from tests.integration.leftovers import consumer_names, running_tasks, tasks_left
from tests.integration.node_support import eventually
from tests.support import envelope, ref


async def _seed(store: EventStore, aggregates: list[AggregateRef], per: int) -> list[int]:
    seqs: list[int] = []
    for aggregate in aggregates:
        committed = await store.append(
            Write.create(aggregate, *(envelope(aggregate, v) for v in range(1, per + 1)))
        )
        seqs.extend(committed.seqs)
    return seqs


async def test_tail_delivers_in_order_from_a_sequence_in_batches(bus: Bus) -> None:
    store = EventStore(bus)
    aggregates = [ref(AggregateType.AGENT) for _ in range(3)]
    seqs = await _seed(store, aggregates, 200)
    tail = Tail(bus, from_seq=seqs[0], subjects=[a.subject for a in aggregates], batch=256)
    got: list[int] = []
    sizes: list[int] = []
    while len(got) < len(seqs):
        batch = await tail.fetch(timeout=2.0)
        assert batch, "tail stalled"
        sizes.append(len(batch))
        got.extend(e.seq for e in batch)
    await tail.close()
    assert got == seqs
    assert max(sizes) > 1  # batched, not one message per request


async def test_a_waiting_read_returns_with_the_first_event_stored_not_at_its_timeout(
    bus: Bus,
) -> None:
    """A read that waits for the next event hands it over as it comes, alone if it comes alone:
    the log's followers (the scheduler above all) see a lone event at once, not when their
    long poll ends."""
    store = EventStore(bus)
    aggregate = ref(AggregateType.AGENT)
    first = await store.append(
        Write.create(aggregate, *(envelope(aggregate, v) for v in (1, 2, 3)))
    )
    tail = Tail(bus, from_seq=first.seqs[0], subjects=[aggregate.subject])
    assert [e.seq for e in await tail.fetch(timeout=2.0)] == list(first.seqs)
    last = first.seqs[-1]
    for version in range(4, 8):
        waiting = asyncio.create_task(tail.fetch(timeout=30.0))
        await asyncio.sleep(0.2)  # the read waits on the server now
        committed = await store.append(Write(aggregate, last, (envelope(aggregate, version),)))
        last = committed.seqs[-1]
        began = time.monotonic()
        got = await asyncio.wait_for(waiting, timeout=10.0)
        assert [e.seq for e in got] == list(committed.seqs)
        assert time.monotonic() - began < 5.0, "the read held the event back until its timeout"
    await tail.close()


async def test_tail_resumes_without_gap_or_duplicate_when_its_consumer_vanishes(bus: Bus) -> None:
    store = EventStore(bus)
    aggregate = ref(AggregateType.AGENT)
    seqs = await _seed(store, [aggregate], 50)
    tail = Tail(bus, from_seq=seqs[0], subjects=[aggregate.subject], batch=20)
    first = await tail.fetch()
    assert [e.seq for e in first] == seqs[:20]
    # The server forgets the consumer (restart, inactivity): the next fetch notices and
    # the one after continues right after the last delivered sequence.
    consumer = tail._consumer
    assert consumer is not None
    await bus.js.delete_consumer(EVENTS_STREAM, consumer)
    got = [e.seq for e in first]
    for _ in range(10):
        got.extend(e.seq for e in await tail.fetch(timeout=0.5))
        if len(got) >= 50:
            break
    await tail.close()
    assert got == seqs


async def test_tail_skips_by_name_without_decoding(bus: Bus) -> None:
    store = EventStore(bus)
    a = ref(AggregateType.AGENT)
    await store.append(Write.create(a, envelope(a, 1, name="Wanted"), envelope(a, 2, name="Other")))
    tail = Tail(bus, subjects=[a.subject], names=frozenset({"Wanted"}))
    batch = await tail.fetch()
    await tail.close()
    assert [e.name for e in batch] == ["Wanted"]
    assert tail.position == (await store.last_seqs([a]))[a]


class Counts(FoldedState):
    def __init__(self) -> None:
        super().__init__()
        self.applied: list[int] = []

    def evolve(self, event: StoredEvent) -> None:
        self.applied.append(event.seq)


async def test_fold_catches_up_to_the_start_position_then_applies_own_writes_once(bus: Bus) -> None:
    store = EventStore(bus)
    aggregates = [ref(AggregateType.NODE) for _ in range(4)]
    seeded = await _seed(store, aggregates, 5)
    fold = Fold(bus, Counts(), subjects=[a.subject for a in aggregates[:3]])
    assert not fold.caught_up.is_set()
    await fold.catch_up()
    assert fold.caught_up.is_set()
    assert fold.state.applied == seeded[:15]  # the fourth aggregate is outside the filter
    first = aggregates[0]
    assert fold.state.guard(first) == seeded[4]

    # An own write is applied from the ack, and its echo from the tail changes nothing.
    write = Write.after(first, fold.state.guard(first), envelope(first, 6))
    committed = await store.append(write)
    fold.record_own([write], committed)
    assert fold.state.applied[-1] == committed.seqs[0]
    echoed = await fold.poll(timeout=1.0)
    assert echoed == []
    assert fold.state.applied.count(committed.seqs[0]) == 1
    assert fold.state.position == committed.seqs[0]

    # Someone else's write arrives through the tail.
    other = aggregates[1]
    theirs = await store.append(Write.after(other, seeded[9], envelope(other, 6)))
    assert [e.seq for e in await fold.poll(timeout=2.0)] == list(theirs.seqs)
    await fold.close()


async def test_fold_restarts_from_the_position_kept_with_its_state(bus: Bus) -> None:
    store = EventStore(bus)
    aggregate = ref(AggregateType.NODE)
    seeded = await _seed(store, [aggregate], 10)
    fold = Fold(bus, Counts(), subjects=[aggregate.subject])
    await fold.catch_up()
    await fold.close()
    saved = fold.state

    later = await store.append(Write.after(aggregate, seeded[-1], envelope(aggregate, 11)))
    resumed_state = Counts()
    resumed_state.position, resumed_state.guards = saved.position, dict(saved.guards)
    resumed = Fold(bus, resumed_state, subjects=[aggregate.subject])
    await resumed.catch_up()
    await resumed.close()
    assert resumed.state.applied == list(later.seqs)  # only the tail, not a replay


async def test_a_fold_of_some_kinds_reads_through_one_filter_and_skips_the_others(
    bus: Bus,
) -> None:
    store = EventStore(bus)
    state = Counts()
    state.position = await store.stream_last_seq()
    node, session = ref(AggregateType.NODE), ref(AggregateType.SESSION)
    first, sessions = await _seed(store, [node], 2), await _seed(store, [session], 2)
    later = await store.append(Write.after(node, first[-1], envelope(node, 3), envelope(node, 4)))
    mixed = [first, sessions, list(later.seqs)]
    nodes = mixed[0] + mixed[2]
    fold = Fold(bus, state, kinds=[AggregateType.NODE])
    await fold.catch_up()
    assert fold.state.applied == nodes  # the session's events are skipped
    assert fold.state.position == mixed[2][-1]

    # The server's consumer has one filter over the whole log: no per-message subject walk.
    name = fold._tail._consumer
    assert name is not None
    info = await bus.js.consumer_info(EVENTS_STREAM, name)
    assert (info.config.filter_subject, info.config.filter_subjects) == ("ev.>", None)

    theirs = await store.append(Write.after(session, mixed[1][-1], envelope(session, 3)))
    ours = await store.append(Write.after(node, mixed[2][-1], envelope(node, 5)))
    assert [e.seq for e in await fold.poll(timeout=2.0)] == list(ours.seqs)
    assert fold.state.position == ours.seqs[0] > theirs.seqs[0]
    assert session.subject not in fold.state.guards
    await fold.close()


class Registrations(Counts):
    """Follows an agent's subject for one kind of its events, as an agent's ledger does."""

    def skips(self, subject: str, name: str) -> bool:
        return name != "Registered"


async def test_a_fold_reads_past_what_its_state_skips_without_decoding_it(
    bus: Bus, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = EventStore(bus)
    agent = ref(AggregateType.AGENT)
    names = ["Registered", "Started", "Started", "Registered", "Started", "Registered"]
    stored = await store.append(
        Write.create(agent, *(envelope(agent, v, name=n) for v, n in enumerate(names, 1)))
    )
    decoded: list[int] = []

    def counting(message: RawMessage) -> StoredEvent:
        decoded.append(message.seq)
        return decode(message)

    # (Nothing undecodable is stored to show it: the log is shared by the whole session.)
    monkeypatch.setattr(events.fold, "decode", counting)
    fold = Fold(bus, Registrations(), subjects=[agent.subject])
    await fold.catch_up()
    registered = [seq for seq, name in zip(stored.seqs, names, strict=True) if name == "Registered"]
    assert fold.state.applied == registered
    assert decoded == registered  # the others were never decoded
    assert fold.state.guard(agent) == stored.seqs[-1]
    assert fold.state.broken == set() and fold.state.poisoned == []
    await fold.close()


def test_a_fold_reads_either_subjects_or_kinds(bus: Bus) -> None:
    with pytest.raises(ValueError, match="subjects or kinds"):
        Fold(bus, Counts(), subjects=["ev.node.*"], kinds=[AggregateType.NODE])


async def test_fold_on_an_empty_filter_catches_up_at_once(bus: Bus) -> None:
    fold = Fold(bus, Counts(), subjects=[ref(AggregateType.NODE).subject])
    await fold.catch_up(timeout=5.0)
    await fold.close()
    assert fold.caught_up.is_set() and fold.state.applied == []


async def test_a_follower_stops_after_its_connection_closed_under_a_waiting_read(
    bus: Bus, nats_settings: NatsSettings
) -> None:
    # nats-py turns the cancellation of a read waiting on a closed connection into
    # ConnectionClosedError: a follower that took it for a lost connection would never stop.
    readers = await consumer_names(bus, EVENTS_STREAM)
    connection = await connect(nats_settings, name="closing")
    fold = Fold(connection, Counts(), subjects=[ref(AggregateType.AGENT).subject])
    follower = Follower(fold, EventStore(connection), poll_timeout_s=30, retry_after_s=0.05)
    tasks = running_tasks()
    follower.start("closing:follow")
    try:
        await asyncio.sleep(0.2)  # its read is waiting
        await connection.close()
        stopping = asyncio.create_task(follower.stop())
        await asyncio.wait({stopping}, timeout=5)
        assert stopping.done()
        assert await tasks_left(tasks) == []
    finally:
        await fold.close()
        # Its reader outlives the closed connection (until the server's inactivity limit).
        for name in await consumer_names(bus, EVENTS_STREAM) - readers:
            await bus.js.delete_consumer(EVENTS_STREAM, name)


class SwallowingFold:
    """A fold whose read returns as usual when cancelled: Python 3.11's ``wait_for`` (under
    every nats-py read) does so when the read completes at the same moment."""

    def __init__(self) -> None:
        self.state = Counts()

    async def poll(self, timeout: float = 1.0) -> list[StoredEvent]:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(timeout)
        return []


async def test_a_follower_stops_even_when_a_read_swallows_its_cancellation(bus: Bus) -> None:
    fold = cast("Fold[Counts]", SwallowingFold())
    follower = Follower(fold, EventStore(bus), poll_timeout_s=0.05, retry_after_s=0.05)
    follower.start("swallowing:follow")
    await asyncio.sleep(0.1)
    stopping = asyncio.create_task(follower.stop())
    await asyncio.wait({stopping}, timeout=5)
    assert stopping.done()


async def test_an_idle_tail_keeps_one_pull_request_open_across_short_reads(bus: Bus) -> None:
    """A tail read often with short timeouts (an agent's 5 s) asks the server once per long
    poll, not once per read: a thousand idle agents used to send 200 requests a second."""
    store = EventStore(bus)
    aggregate = ref(AggregateType.AGENT)
    first = await store.append(Write.create(aggregate, envelope(aggregate, 1)))
    tail = Tail(bus, from_seq=first.seqs[0], subjects=[aggregate.subject])
    assert [e.seq for e in await tail.fetch(timeout=0.1)] == list(first.seqs)
    requests: list[bytes] = []

    async def note(msg: Msg) -> None:
        requests.append(msg.data)

    sub = await bus.nc.subscribe(f"{PULL_PREFIX}.{EVENTS_STREAM}.{tail._consumer}", cb=note)
    try:
        for _ in range(8):
            assert await tail.fetch(timeout=0.1) == []
        await bus.nc.flush()
        assert len(requests) <= 1
        assert all(json.loads(r)["expires"] >= LONG_POLL_S * 1e9 for r in requests)
        # What is stored later comes through the request already open, at once.
        later = await store.append(Write(aggregate, first.seqs[-1], (envelope(aggregate, 2),)))
        began = time.monotonic()
        assert [e.seq for e in await tail.fetch(timeout=5.0)] == list(later.seqs)
        assert time.monotonic() - began < 2.0
        assert len(requests) <= 1
    finally:
        await sub.unsubscribe()
        await tail.close()


async def test_a_tail_reads_on_at_once_after_a_server_restart(tmp_path: Path) -> None:
    """The server's restart ends the long poll in flight (and the consumer with it): what is
    stored after the reconnect reaches the tail at once, not when the lost request would have
    expired."""
    server = NatsServer(data_dir=tmp_path / "nats", port=free_port()).start()
    bus = None
    try:
        settings = NatsSettings(url=server.url, request_timeout_s=10.0)
        bus = await connect(settings, name="tail-reconnect")
        await ensure_streams(bus)
        store = EventStore(bus)
        aggregate = ref(AggregateType.AGENT)
        first = await store.append(Write.create(aggregate, envelope(aggregate, 1)))
        tail = Tail(bus, from_seq=first.seqs[-1] + 1, subjects=[aggregate.subject])
        assert await tail.fetch(timeout=0.2) == []  # a long poll is open now

        server.stop()
        server.start()

        async def reconnected() -> bool:
            return bool(bus and bus.nc.is_connected and bus.nc.stats["reconnects"])

        await eventually(reconnected, what="the reconnect")
        later = await store.append(Write(aggregate, first.seqs[-1], (envelope(aggregate, 2),)))
        got: list[int] = []
        began = time.monotonic()
        while not got and time.monotonic() - began < LONG_POLL_S / 3:
            got = [e.seq for e in await tail.fetch(timeout=1.0)]
        assert got == list(later.seqs)
        assert time.monotonic() - began < 5.0
        await tail.close()
    finally:
        if bus is not None:
            await bus.close()
        server.stop()
