"""The JetStream event store beyond the shared contract (``tests/contract``): racing writers,
concurrent group commits, lost answers, paged reads, a log that cannot be edited."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import nats.errors
import pytest

from events.bus import Bus
from events.store import EventStore
from events.writes import (
    AggregateRef,
    Committed,
    ConcurrencyConflict,
    Write,
)
from schemas.subjects import EVENTS_STREAM
from tests.support import envelope, ref


async def test_two_writers_racing_exactly_one_wins_and_the_loser_decides_again(bus: Bus) -> None:
    store = EventStore(bus)
    a = ref()
    await store.append(Write.create(a, envelope(a, 1, payload={"total": 0})))

    async def add(amount: int) -> tuple[int, int]:
        """Load, decide (running total), append; on conflict reload and decide again."""
        attempts = 0
        while True:
            attempts += 1
            history = await store.read(a)
            total = history.events[-1].envelope.payload["total"] + amount
            version = history.events[-1].envelope.aggregate_version + 1
            write = Write.after(a, history.last_seq, envelope(a, version, payload={"total": total}))
            try:
                await store.append(write)
                return attempts, total
            except ConcurrencyConflict as exc:
                assert set(exc.stale) == {a}

    for round_ in range(10):
        results = await asyncio.gather(add(1), add(100))
        # Both started from the same state, so exactly one needed a second attempt.
        assert sorted(r[0] for r in results) == [1, 2], f"round {round_}: {results}"
    history = await store.read(a)
    totals = [e.envelope.payload["total"] for e in history.events]
    assert totals[-1] == 10 * 101
    assert [e.envelope.aggregate_version for e in history.events] == list(range(1, 22))


async def test_sixty_concurrent_group_commits_report_exactly_what_was_stored(bus: Bus) -> None:
    store = EventStore(bus, max_open_batches=8)
    rng = random.Random(7)
    existing = [ref() for _ in range(20)]
    for aggregate in existing:
        await store.append(Write.create(aggregate, envelope(aggregate, 1)))

    batches: list[list[Write]] = []
    for i in range(60):
        fresh = [ref() for _ in range(rng.randint(1, 6))]
        writes = [Write.create(f, envelope(f, 1), envelope(f, 2)) for f in fresh]
        if i % 3 == 0:  # a third of them carry a stale guard somewhere
            victim = existing[i // 3]
            writes.insert(rng.randint(0, len(writes)), Write.create(victim, envelope(victim, 2)))
        batches.append(writes)

    results = await asyncio.gather(*(store.commit(w) for w in batches), return_exceptions=True)

    for group, result in zip(batches, results, strict=True):
        new_writes = [w for w in group if w.aggregate not in existing]
        stored = [await store.read(w.aggregate) for w in new_writes]
        if isinstance(result, Committed):
            for write, history in zip(new_writes, stored, strict=True):
                assert [e.envelope.event_id for e in history.events] == [
                    e.event_id for e in write.events
                ]
                assert history.last_seq == result.last_seqs[write.aggregate]
        else:
            assert isinstance(result, ConcurrencyConflict), repr(result)
            assert all(h.events == [] for h in stored)
    outcomes = [isinstance(r, Committed) for r in results]
    assert outcomes.count(True) == 40 and outcomes.count(False) == 20


class _AnswerLost:
    """Delegates to the real client, but the first write's answer is lost after it was stored."""

    def __init__(self, inner: Any, method: str) -> None:
        self._inner = inner
        self._method = method
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name != self._method:
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            await attribute(*args, **kwargs)
            if self.lost == 0:
                self.lost += 1
                raise nats.errors.TimeoutError
            return await attribute(*args, **kwargs)

        return call


@pytest.mark.parametrize("events_in_write", [1, 3], ids=["single-append", "atomic-batch"])
async def test_a_commit_whose_answer_was_lost_ends_as_success(
    bus: Bus, events_in_write: int
) -> None:
    if events_in_write == 1:
        lossy = Bus(nc=bus.nc, js=_AnswerLost(bus.js, "publish"), settings=bus.settings)  # type: ignore[arg-type]
    else:
        lossy = Bus(nc=_AnswerLost(bus.nc, "request"), js=bus.js, settings=bus.settings)  # type: ignore[arg-type]
    store = EventStore(lossy)
    a, b = ref(), ref()
    writes = [Write.create(a, *(envelope(a, v) for v in range(1, events_in_write + 1)))]
    if events_in_write > 1:
        writes.append(Write.create(b, envelope(b, 1)))

    try:
        committed = await store.commit(writes)
    finally:
        await lossy.replies.close()  # its own inbox on the shared connection

    assert committed.recovered
    assert store.stats.recovered == 1
    history = await EventStore(bus).read(a)
    assert [e.seq for e in history.events] == list(committed.seqs[:events_in_write])
    assert len(history.events) == events_in_write  # stored once, not twice


async def test_retrying_a_committed_write_is_reported_as_stored(bus: Bus) -> None:
    store = EventStore(bus)
    a, b = ref(), ref()
    writes = [Write.create(a, envelope(a, 1)), Write.create(b, envelope(b, 1))]
    first = await store.commit(writes)
    again = await store.commit(writes)
    assert again.recovered and again.seqs == first.seqs


async def test_reading_fifty_events_costs_one_request(bus: Bus) -> None:
    store = EventStore(bus)
    a = ref()
    seq = 0
    for version in range(1, 51, 10):
        committed = await store.append(
            Write(a, seq, tuple(envelope(a, v) for v in range(version, version + 10)))
        )
        seq = committed.last_seqs[a]
    before = store.reader.requests
    history = await store.read(a)
    assert store.reader.requests - before == 1
    assert [e.envelope.aggregate_version for e in history.events] == list(range(1, 51))
    assert history.last_seq == seq


async def test_reading_more_than_one_batch_pages_through_the_subject(bus: Bus) -> None:
    store = EventStore(bus)
    a = ref()
    await store.append(Write.create(a, *(envelope(a, v) for v in range(1, 601))))
    before = store.reader.requests
    history = await store.read(a)
    assert len(history.events) == 600
    assert store.reader.requests - before == 3  # 256 + 256 + 88
    partial = await store.read(a, after_seq=history.events[549].seq)
    assert [e.envelope.aggregate_version for e in partial.events] == list(range(551, 601))


async def test_the_log_cannot_be_edited(bus: Bus) -> None:
    store = EventStore(bus)
    a = ref()
    committed = await store.append(Write.create(a, envelope(a, 1)))
    with pytest.raises(nats.js.errors.APIError):
        await bus.js.delete_msg(EVENTS_STREAM, committed.seqs[0])
    with pytest.raises(nats.js.errors.APIError):
        await bus.js.purge_stream(EVENTS_STREAM)
    info = await bus.js.stream_info(EVENTS_STREAM)
    assert info.config.allow_msg_ttl is not True
    assert info.config.allow_rollup_hdrs is not True
    assert info.config.max_age == 0


def test_a_group_may_not_name_an_aggregate_twice() -> None:
    from events.writes import validate_group

    a = ref()
    with pytest.raises(ValueError, match="appears twice"):
        validate_group([Write.create(a, envelope(a, 1)), Write.after(a, 1, envelope(a, 2))])
    many = [ref() for _ in range(1001)]
    with pytest.raises(ValueError, match="at most 1000"):
        validate_group([Write.create(r, envelope(r, 1)) for r in many])


def test_a_write_checks_its_events() -> None:
    a, b = ref(), ref()
    with pytest.raises(ValueError, match="consecutive"):
        Write.create(a, envelope(a, 1), envelope(a, 3))
    with pytest.raises(ValueError, match="belongs to"):
        Write.create(a, envelope(b, 1))
    with pytest.raises(ValueError, match="at least one event"):
        Write.create(a)
    with pytest.raises(ValueError, match=">= 0"):
        Write(a, -1, (envelope(a, 1),))
    assert isinstance(a, AggregateRef)
