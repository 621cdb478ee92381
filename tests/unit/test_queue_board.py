"""The queue board without NATS: its values, the writes it skips or defers, and the positions
it answers from what it watched (a fake bucket with the real bucket's protocol)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from events.queues import MAX_IDS, QueueBoard, QueueUpdate, decode, encode

AT = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class FakeBucket:
    """Values by key; ``watch`` gives what is there, a marker, then every put."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.puts: list[str] = []
        self._watchers: list[asyncio.Queue[tuple[str, bytes | None]]] = []

    async def get(self, key: str) -> bytes | None:
        return self.values.get(key)

    async def put(self, key: str, value: bytes) -> None:
        self.values[key] = value
        self.puts.append(key)
        for queue in self._watchers:
            queue.put_nowait((key, value))

    async def watch(self) -> AsyncIterator[tuple[str, bytes | None] | None]:
        queue: asyncio.Queue[tuple[str, bytes | None]] = asyncio.Queue()
        self._watchers.append(queue)
        for item in list(self.values.items()):
            yield item
        yield None
        while True:
            yield await queue.get()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ids(n: int, prefix: str = "s") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_a_value_is_compact_json_with_at_most_10000_ids_and_the_true_total() -> None:
    raw = encode(ids(MAX_IDS + 5), MAX_IDS + 5, AT)
    assert b" " not in raw
    data = json.loads(raw)
    assert (len(data["ids"]), data["total"], data["at"]) == (MAX_IDS, MAX_IDS + 5, AT.isoformat())
    assert decode("g", raw) == QueueUpdate("g", tuple(ids(MAX_IDS)), MAX_IDS + 5)
    assert decode("g", encode(["a", "b"], 2, AT)) == QueueUpdate("g", ("a", "b"), 2)


@pytest.mark.parametrize("raw", [None, b"", b"not json", b'{"ids": 3}', b'{"total": 2}'])
def test_a_delete_or_an_unreadable_value_is_an_empty_queue(raw: bytes | None) -> None:
    assert decode("g", raw) == QueueUpdate("g", (), 0)


async def test_an_unchanged_queue_is_not_written_again() -> None:
    bucket, clock = FakeBucket(), Clock()
    board = QueueBoard(bucket, clock=clock)
    await board.publish("gpu", ["a", "b"], 2)
    clock.now += 1
    await board.publish("gpu", ("a", "b"), 2)  # same ids, same total: no write
    assert bucket.puts == ["gpu"]
    clock.now += 1
    await board.publish("gpu", ["b"], 1)
    clock.now += 1
    await board.publish("cpu", ["c"], 1)
    assert bucket.puts == ["gpu", "gpu", "cpu"]
    assert decode("gpu", bucket.values["gpu"]) == QueueUpdate("gpu", ("b",), 1)
    # A restarted scheduler reads what the bucket shows before writing the same again.
    again = QueueBoard(bucket, clock=clock)
    await again.publish("gpu", ["b"], 1)
    assert bucket.puts == ["gpu", "gpu", "cpu"]


async def test_writes_to_a_group_are_spaced_and_the_last_publish_wins() -> None:
    bucket = FakeBucket()
    board = QueueBoard(bucket, min_interval_s=0.05)
    await board.publish("gpu", ["a", "b", "c"], 3)
    await board.publish("gpu", ["b", "c"], 2)  # within the interval: deferred
    await board.publish("gpu", ["c"], 1)  # replaces the deferred one
    await board.publish("cpu", ["x"], 1)  # another group is not held back
    assert bucket.puts == ["gpu", "cpu"]
    await asyncio.sleep(0.1)
    assert bucket.puts == ["gpu", "cpu", "gpu"]
    assert decode("gpu", bucket.values["gpu"]).ids == ("c",)


async def test_close_writes_what_waits_out_the_interval() -> None:
    bucket = FakeBucket()
    board = QueueBoard(bucket, min_interval_s=60)
    await board.publish("gpu", ["a"], 1)
    await board.publish("gpu", [], 0)
    assert bucket.puts == ["gpu"]
    await board.close()
    assert decode("gpu", bucket.values["gpu"]) == QueueUpdate("gpu", (), 0)


def test_positions_are_one_based_per_group_and_follow_each_update() -> None:
    board = QueueBoard(FakeBucket())
    board.apply(QueueUpdate("gpu", ("a", "b", "c"), 3))
    board.apply(QueueUpdate("cpu", ("x",), 12_000))
    places = [(1, 3), (2, 3), (3, 3), (1, 12_000)]
    assert [board.position(s) for s in ("a", "b", "c", "x")] == places
    board.apply(QueueUpdate("gpu", ("c", "b"), 2))  # a placed, c moved ahead
    assert [board.position(s) for s in ("a", "b", "c")] == [None, (2, 2), (1, 2)]
    board.apply(QueueUpdate("cpu", ("b",), 1))  # b moved groups before gpu said so
    board.apply(QueueUpdate("gpu", ("c",), 1))
    assert (board.position("b"), board.position("c"), board.position("x")) == ((1, 1), (1, 1), None)
    assert board.position("never") is None


async def test_watching_reads_the_current_queues_then_each_change() -> None:
    bucket = FakeBucket()
    writer = QueueBoard(bucket, min_interval_s=0)
    await writer.publish("gpu", ["a", "b"], 2)
    reader = QueueBoard(bucket)
    await reader.start_watching(ready_timeout_s=1)
    assert reader.ready.is_set() and reader.position("b") == (2, 2)
    seen = reader.generation
    waiting = asyncio.create_task(reader.changed(seen))
    await asyncio.sleep(0)
    assert not waiting.done()
    await writer.publish("gpu", ["b"], 1)
    assert await asyncio.wait_for(waiting, 1) == seen + 1
    assert reader.position("b") == (1, 1) and reader.position("a") is None
    assert await reader.changed(seen) == seen + 1  # already changed: no wait
    await reader.close()
