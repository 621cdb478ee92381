"""The event-store contract, run on both stores: ``EventStore`` on a real nats-server and
``InMemoryStore``. Expected last sequence per aggregate, create-once, atomic batches that
store all or nothing and name every stale aggregate, reads after a sequence, the log's end,
upcasting on read, and the size limit. A store that passes here may stand in for the other.
"""

from __future__ import annotations

import pytest

from events.bus import Bus
from events.domain.quota import QuotaReleased
from events.memory import InMemoryStore
from events.store import EventStore
from events.writes import (
    AggregateRef,
    ConcurrencyConflict,
    Store,
    Write,
    WriteRejectedError,
)
from schemas.subjects import AggregateType
from tests.support import envelope, ref


@pytest.fixture(params=["jetstream", "memory"])
def store(request: pytest.FixtureRequest, bus: Bus) -> Store:
    """Each test runs on both. (The server is shared by the whole session, so asking for it
    costs the in-memory runs nothing.)"""
    if request.param == "memory":
        return InMemoryStore()
    return EventStore(bus)


async def test_create_is_once_forever(store: Store) -> None:
    a = ref()
    first = await store.append(Write.create(a, envelope(a, 1)))
    with pytest.raises(ConcurrencyConflict) as conflict:
        await store.append(Write.create(a, envelope(a, 1)))
    assert conflict.value.stale == {a: first.seqs[0]}
    history = await store.read(a)
    assert [e.envelope.aggregate_version for e in history.events] == [1]
    assert history.last_seq == first.seqs[0]


async def test_an_append_after_the_guard_is_stored_and_a_stale_guard_is_refused(
    store: Store,
) -> None:
    a = ref()
    first = await store.append(Write.create(a, envelope(a, 1)))
    second = await store.append(Write.after(a, first.seqs[0], envelope(a, 2)))
    assert second.seqs[0] > first.seqs[0]
    assert second.last_seqs == {a: second.seqs[0]}
    with pytest.raises(ConcurrencyConflict) as conflict:
        await store.append(Write.after(a, first.seqs[0], envelope(a, 3)))
    assert conflict.value.stale == {a: second.seqs[0]}
    assert [e.envelope.aggregate_version for e in (await store.read(a)).events] == [1, 2]


async def test_a_group_commit_stores_every_write_contiguously_in_order(store: Store) -> None:
    a, b = ref(), ref()
    committed = await store.commit(
        [Write.create(a, envelope(a, 1), envelope(a, 2)), Write.create(b, envelope(b, 1))]
    )
    assert len(committed.seqs) == 3
    assert list(committed.seqs) == list(range(committed.seqs[0], committed.seqs[0] + 3))
    assert committed.last_seqs == {a: committed.seqs[1], b: committed.seqs[2]}
    assert [e.seq for e in (await store.read(a)).events] == list(committed.seqs[:2])
    assert await store.last_seqs([a, b]) == committed.last_seqs


async def test_a_group_commit_with_stale_guards_stores_nothing_and_names_each(
    store: Store,
) -> None:
    a, b, c, d = ref(), ref(), ref(), ref()
    b_at = (await store.append(Write.create(b, envelope(b, 1)))).seqs[0]
    c_at = (await store.append(Write.create(c, envelope(c, 1)))).seqs[0]
    with pytest.raises(ConcurrencyConflict) as conflict:
        await store.commit(
            [
                Write.create(a, envelope(a, 1)),
                Write.create(b, envelope(b, 2)),  # stale: b exists
                Write.create(c, envelope(c, 2)),  # stale: c exists
                Write.create(d, envelope(d, 1)),
            ]
        )
    assert conflict.value.stale == {b: b_at, c: c_at}
    for aggregate in (a, d):
        assert (await store.read(aggregate)).events == []
    assert await store.last_seqs([a, b, c, d]) == {a: 0, b: b_at, c: c_at, d: 0}


async def test_reads_after_a_sequence_and_the_logs_end(store: Store) -> None:
    a = ref()
    seqs = [(await store.append(Write.create(a, envelope(a, 1)))).seqs[0]]
    for version in range(2, 6):
        write = Write.after(a, seqs[-1], envelope(a, version))
        seqs.append((await store.append(write)).seqs[0])
    after = await store.read(a, after_seq=seqs[2])
    assert [e.seq for e in after.events] == seqs[3:]
    assert after.last_seq == seqs[-1]
    nothing = await store.read(a, after_seq=seqs[-1])
    assert nothing.events == [] and nothing.last_seq == seqs[-1]
    assert await store.stream_last_seq() >= seqs[-1]
    missing = ref()
    assert (await store.read(missing)).last_seq == 0


async def test_reads_are_upcast_to_the_current_schema(store: Store) -> None:
    """A version-1 QuotaReleased (one session) is read back as version 2 (a map of them)."""
    a = AggregateRef(AggregateType.QUOTA, ref().id)
    v1 = {"session_id": "s1", "reason": "ended"}
    old = envelope(a, 1, name=QuotaReleased.event_name, payload=v1)
    await store.append(Write.create(a, old))
    (stored,) = (await store.read(a)).events
    assert stored.envelope.schema_version == QuotaReleased.schema_version == 2
    assert stored.envelope.payload == {"sessions": {"s1": "ended"}}


async def test_an_event_over_the_size_limit_is_refused_and_nothing_is_stored(
    store: Store,
) -> None:
    a = ref()
    huge = envelope(a, 1, payload={"blob": "x" * (300 * 1024)})
    with pytest.raises(WriteRejectedError, match="limit"):
        await store.append(Write.create(a, huge))
    assert (await store.read(a)).events == []


async def test_a_group_may_not_name_an_aggregate_twice_nor_be_empty(store: Store) -> None:
    a = ref()
    with pytest.raises(ValueError, match="twice"):
        await store.commit([Write.create(a, envelope(a, 1)), Write.create(a, envelope(a, 2))])
    with pytest.raises(ValueError, match="at least one"):
        await store.commit([])
    assert (await store.read(a)).events == []
