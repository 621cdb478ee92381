"""``events.one_by_one``: one aggregate's several events stored one message at a time, each
guarded by the one before (no atomic batch); other writes go through as the wrapped store's
group commit. An agent whose report is cut part-way (the answer to its second message lost)
reads back, decides again and ends with each fact on the log once. On the in-memory store,
which keeps the JetStream store's rules."""

from __future__ import annotations

import pytest

from events.envelope import StoredEvent
from events.memory import InMemoryStore
from events.one_by_one import OneByOne
from events.writes import Committed, ConcurrencyConflict, Write
from schemas.resources import ResourceSlots
from services.node.record import AgentRecord, Started
from tests.support import NOW, envelope, ref

STARTED = "KernelStarted"


async def test_one_aggregates_events_go_one_message_at_a_time() -> None:
    store = InMemoryStore()
    aggregate = ref()
    committed = await OneByOne(store).commit(
        [Write(aggregate, 0, tuple(envelope(aggregate, v) for v in (1, 2, 3)))]
    )
    assert store.commits == 3
    assert committed == Committed(seqs=(1, 2, 3), last_seqs={aggregate: 3})
    history = await store.read(aggregate)
    assert [e.envelope.aggregate_version for e in history.events] == [1, 2, 3]
    assert history.last_seq == 3


async def test_several_aggregates_are_one_group_commit_as_before() -> None:
    store = InMemoryStore()
    first, second = ref(), ref()
    writes = [
        Write(first, 0, (envelope(first, 1), envelope(first, 2))),
        Write(second, 0, (envelope(second, 1),)),
    ]
    committed = await OneByOne(store).commit(writes)
    assert store.commits == 1
    assert committed.last_seqs == {first: 2, second: 3}


async def test_a_stale_guard_stores_nothing() -> None:
    store = InMemoryStore()
    aggregate = ref()
    await store.append(Write(aggregate, 0, (envelope(aggregate, 1),)))
    with pytest.raises(ConcurrencyConflict):
        await OneByOne(store).commit(
            [Write(aggregate, 0, (envelope(aggregate, 1), envelope(aggregate, 2)))]
        )
    assert [e.seq for e in (await store.read(aggregate)).events] == [1]


class _LosesAnAnswer(InMemoryStore):
    """Loses the answer to its ``nth`` commit (stored or not), once."""

    def __init__(self, nth: int, *, stored: bool) -> None:
        super().__init__()
        self._nth, self._stored, self._calls = nth, stored, 0

    async def commit(self, writes: list[Write]) -> Committed:
        self._calls += 1
        if self._calls == self._nth:
            self.fail_next(stored=self._stored)
        return await super().commit(writes)


@pytest.mark.parametrize("stored", [True, False])
async def test_a_report_cut_part_way_ends_with_each_fact_once(
    stored: bool, caplog: pytest.LogCaptureFixture
) -> None:
    store = _LosesAnAnswer(3, stored=stored)  # 1: registered; 2, 3, 4: the three facts
    record = AgentRecord(store, "n-1")
    await record.register(
        hostname="h", backend="simulated", capacity=ResourceSlots(), devices=(), images=(),
        now=NOW,
    )  # fmt: skip
    facts = [Started(f"k-{n}", f"s-{n}", f"c-{n}") for n in range(3)]
    await record.report(facts, NOW)

    assert "reading back" in caplog.text  # the answer was lost, part-way
    events: list[StoredEvent] = (await store.read(record.ref)).events
    started = [
        e.envelope.payload["kernel_id"] for e in events if e.envelope.name == "KernelStarted"
    ]
    assert sorted(started) == ["k-0", "k-1", "k-2"]  # each once, none lost
    assert [e.envelope.aggregate_version for e in events] == list(range(1, len(events) + 1))
    assert set(record.running) == {"k-0", "k-1", "k-2"}
