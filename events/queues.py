"""Queue positions: each resource group's waiting sessions in queue order, in the ``jy-queues``
bucket (key = group name). The scheduler writes it after its passes; the gateway watches it to
answer ``queuePosition`` and push position changes.

Positions change with every placement, so they are derived state, not history: nothing here
goes to the event log, a value is replaced whole, and a lost write is repaired by the next one.
A value is compact JSON, ``{"ids": [first 10,000 ids], "total": N, "at": iso time}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import NamedTuple, Protocol

import nats.errors
from nats.js.errors import KeyDeletedError, KeyNotFoundError, KeyValueError
from nats.js.kv import KeyValue

from events.bus import Bus
from events.cancelling import cancelling
from schemas.ids import check_token
from schemas.subjects import QUEUES_BUCKET

log = logging.getLogger(__name__)

MAX_IDS = 10_000
"""Ids kept per group; a session further back has a queue but no known position."""
MIN_INTERVAL_S = 0.5
RETRY_AFTER_S = 1.0
KV_STREAM = f"KV_{QUEUES_BUCKET}"
"""The stream that holds the bucket (nats' naming for key-value buckets)."""


class QueueUpdate(NamedTuple):
    group: str
    ids: tuple[str, ...]
    """The first ``MAX_IDS`` waiting sessions, head first; empty: nobody waits."""
    total: int
    """How many wait in all (may exceed ``len(ids)``)."""


def encode(ids: Sequence[str], total: int, at: datetime) -> bytes:
    kept = list(ids[:MAX_IDS])
    return json.dumps(
        {"ids": kept, "total": max(total, len(kept)), "at": at.isoformat()}, separators=(",", ":")
    ).encode()


def decode(group: str, raw: bytes | None) -> QueueUpdate:
    """A stored value; a delete, or a value this code cannot read, is an empty queue (it shows
    no position rather than a wrong one)."""
    try:
        data = json.loads(raw or b"{}")
        ids = tuple(str(i) for i in data["ids"])
        return QueueUpdate(group, ids, max(int(data["total"]), len(ids)))
    except (ValueError, KeyError, TypeError):
        return QueueUpdate(group, (), 0)


class QueueBucket(Protocol):
    """Where the board keeps its values: the ``jy-queues`` bucket, or a fake in tests."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes) -> None: ...

    def watch(self) -> AsyncIterator[tuple[str, bytes | None] | None]:
        """(key, value) for every key's latest value (None: deleted), a ``None`` once they
        have all come, then each change."""
        ...


class QueueBoard:
    """Writes (``publish``) and reads (``watch``, ``position``) the queues of every group."""

    def __init__(
        self,
        bucket: QueueBucket,
        *,
        min_interval_s: float = MIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bucket = bucket
        self._min_interval_s = min_interval_s
        self._clock = clock
        # Writing side: what each group should show, what it shows, when it was last written.
        self._wanted: dict[str, tuple[tuple[str, ...], int]] = {}
        self._shown: dict[str, tuple[tuple[str, ...], int]] = {}
        self._written_at: dict[str, float] = {}
        self._later: dict[str, asyncio.Task[None]] = {}
        # Reading side: every group's queue, and where each listed session stands in it.
        self.queues: dict[str, QueueUpdate] = {}
        self._places: dict[str, tuple[str, int]] = {}
        self.generation = 0
        """Grows with every change read from the bucket."""
        self._change = asyncio.Event()
        self.ready = asyncio.Event()
        self._watching: asyncio.Task[None] | None = None

    @classmethod
    def on(cls, bus: Bus, *, min_interval_s: float = MIN_INTERVAL_S) -> QueueBoard:
        return cls(NatsQueueBucket(bus), min_interval_s=min_interval_s)

    # ---- writing (the scheduler) ---------------------------------------------------------

    async def publish(self, group: str, session_ids: Sequence[str], total: int) -> None:
        """Show ``group``'s waiting sessions, head first (``total`` of them; only the first
        10,000 ids are kept). Nothing is written when the queue shows this already; a group
        written less than ``min_interval_s`` ago is written once that has passed, with
        whatever was published last by then."""
        check_token(group, "resource group")
        kept = tuple(session_ids[:MAX_IDS])
        self._wanted[group] = (kept, max(total, len(kept)))
        if group in self._later:
            return  # the pending write takes the latest
        wait = self._written_at.get(group, -self._min_interval_s) + self._min_interval_s
        wait -= self._clock()
        if wait > 0:
            self._later[group] = asyncio.create_task(self._write_later(group, wait))
            return
        await self._write(group)

    async def flush(self) -> None:
        """Write now what is waiting out the interval (before a scheduler stops)."""
        for group, task in list(self._later.items()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self._later.pop(group, None)
            await self._write(group)

    async def _write_later(self, group: str, wait: float) -> None:
        await asyncio.sleep(wait)
        self._later.pop(group, None)
        await self._write(group)

    async def _write(self, group: str) -> None:
        wanted = self._wanted[group]
        try:
            if group not in self._shown:
                # After a restart the bucket may already show this: read once, not write.
                self._shown[group] = self._shown_of(decode(group, await self._bucket.get(group)))
            if self._shown[group] == wanted:
                return
            ids, total = wanted
            await self._bucket.put(group, encode(ids, total, datetime.now(UTC)))
        except (KeyValueError, nats.errors.Error, OSError) as exc:
            # Derived state: the next publish writes it again; the scheduler goes on deciding.
            self._shown.pop(group, None)
            log.warning("cannot publish the queue of group %s: %r", group, exc)
            return
        self._shown[group] = wanted
        self._written_at[group] = self._clock()

    @staticmethod
    def _shown_of(update: QueueUpdate) -> tuple[tuple[str, ...], int]:
        return update.ids, update.total

    # ---- reading (the gateway) -----------------------------------------------------------

    async def watch(self) -> AsyncIterator[QueueUpdate]:
        """Each group's queue as it is now, then every change; ``position`` answers from what
        it has read, and ``ready`` is set once the queues of the start have all been read.
        Follows the bucket until the caller stops iterating."""
        async for item in self._bucket.watch():
            if item is None:
                self.ready.set()
                continue
            update = decode(*item)
            self.apply(update)
            yield update

    def apply(self, update: QueueUpdate) -> None:
        old = self.queues.get(update.group)
        for session_id in old.ids if old is not None else ():
            if self._places.get(session_id, ("", 0))[0] == update.group:
                del self._places[session_id]
        self.queues[update.group] = update
        for index, session_id in enumerate(update.ids):
            self._places[session_id] = (update.group, index)
        self.generation += 1
        self._change.set()
        self._change = asyncio.Event()

    def position(self, session_id: str) -> tuple[int, int] | None:
        """(1-based position, how many wait in its group), or None when the session is not
        among the ids shown (not waiting, or further back than 10,000)."""
        place = self._places.get(session_id)
        if place is None:
            return None
        group, index = place
        return index + 1, self.queues[group].total

    async def changed(self, since: int) -> int:
        """Wait until the board has changed after ``generation`` was ``since``."""
        while self.generation == since:
            await self._change.wait()
        return self.generation

    async def start_watching(self, *, ready_timeout_s: float = 2.0) -> None:
        """Follow the bucket in the background; returns once the current queues are read (or
        after ``ready_timeout_s``: positions then fill in as they come)."""

        async def follow() -> None:
            async for _ in self.watch():
                pass

        self._watching = asyncio.create_task(follow(), name="queue-board")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.ready.wait(), ready_timeout_s)

    async def close(self) -> None:
        """Stop watching and write what waits out the interval."""
        if self._watching is not None:
            self._watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watching
            self._watching = None
        await self.flush()


class NatsQueueBucket:
    """The ``jy-queues`` key-value bucket (declared by ``events.bus.ensure_streams``)."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(QUEUES_BUCKET)
        return self._kv

    async def get(self, key: str) -> bytes | None:
        try:
            return (await (await self._bucket()).get(key)).value
        except (KeyNotFoundError, KeyDeletedError):
            return None

    async def put(self, key: str, value: bytes) -> None:
        await (await self._bucket()).put(key, value)

    async def watch(self) -> AsyncIterator[tuple[str, bytes | None] | None]:
        # An ordered consumer: the client recreates it on a gap or a server restart. If the
        # watch itself fails it is opened again, and repeats the latest value of every key
        # (applying a queue twice changes nothing). A cancellation a read swallowed ends it
        # at the next entry (``events.cancelling``).
        #
        # "They have all come" is judged here, not by nats-py's marker: the client puts its
        # marker first when the server has pushed every value before the watch's callback
        # ran (the consumer then reports nothing pending and nothing handled), so a reader
        # could be told it is ready before any value was applied (seen in CI). Ready here:
        # once a value came with nothing left pending behind it on the server, or the value
        # of the bucket's last sequence when the watch opened (the newest of some key, which
        # is kept and delivered); at once if the bucket was empty.
        while not cancelling():
            try:
                bucket = await self._bucket()
                newest = (await self._bus.js.stream_info(KV_STREAM)).state.last_seq
                watcher = await bucket.watchall()
            except (KeyValueError, nats.errors.Error, OSError) as exc:
                log.warning("cannot watch %s, retrying: %r", QUEUES_BUCKET, exc)
                await asyncio.sleep(RETRY_AFTER_S)
                continue
            caught_up = newest == 0
            if caught_up:
                yield None
            try:
                async for entry in watcher:
                    if cancelling():
                        return
                    if entry is None:
                        continue  # the client's marker: see above
                    if entry.operation in ("DEL", "PURGE"):
                        yield entry.key, None
                    else:
                        yield entry.key, entry.value
                    if not caught_up and (entry.delta == 0 or entry.revision >= newest):
                        caught_up = True
                        yield None
            finally:
                with contextlib.suppress(Exception):
                    await watcher.stop()  # type: ignore[no-untyped-call]
            await asyncio.sleep(RETRY_AFTER_S)
