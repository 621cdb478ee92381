"""The quarantine: events a consumer could not decode or apply, kept in the ``jy-quarantine``
bucket (one key per consumer and stream sequence, no TTL) so operators see them
(GraphQL ``quarantine``, ``jetyard quarantine``, ``/healthz`` degraded).

The log is immutable, so such an event would stop its consumer on every restart. Instead the
consumer records it here, leaves its aggregate alone from then on (decides nothing more about
it, folds none of its later events) and goes on with every other aggregate.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue

from events.bus import Bus
from schemas.subjects import QUARANTINE_BUCKET

log = logging.getLogger(__name__)

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_=-]")
MAX_ERROR = 500


@dataclass(frozen=True, slots=True)
class Poison:
    """One event a consumer could not fold."""

    seq: int
    consumer: str
    subject: str
    """The aggregate's subject (``ev.<type>.<id>``), as the message was stored."""
    event: str
    """Its wire name (the ``Jy-Event`` header), or "" when it had none."""
    error: str
    at: str

    @classmethod
    def of(cls, seq: int, consumer: str, subject: str, event: str, exc: BaseException) -> Poison:
        error = f"{type(exc).__name__}: {exc}"
        return cls(
            seq=seq,
            consumer=consumer,
            subject=subject[:300],
            event=event[:128],
            error=error[:MAX_ERROR],
            at=datetime.now(UTC).isoformat(),
        )

    @property
    def key(self) -> str:
        return f"{_KEY_UNSAFE.sub('_', self.consumer)}.{self.seq}"


class Quarantine:
    """Reads and writes the quarantine bucket."""

    def __init__(self, kv: KeyValue, js: JetStreamContext) -> None:
        self._kv = kv
        self._js = js
        self._recent: tuple[float, list[Poison]] | None = None

    async def recent_entries(self, max_age_s: float = 5.0) -> list[Poison]:
        """``entries()``, read again at most every ``max_age_s`` (for ``/healthz``, which
        monitors ask often: each full read opens a consumer on the bucket)."""
        now = time.monotonic()
        if self._recent is None or now - self._recent[0] > max_age_s:
            self._recent = (now, await self.entries())
        return self._recent[1]

    @classmethod
    async def open(cls, bus: Bus) -> Quarantine:
        return cls(await bus.js.key_value(QUARANTINE_BUCKET), bus.js)

    async def record(self, poisons: list[Poison]) -> None:
        """Keep each one (again is harmless: same key, same meaning). Said loudly once."""
        for poison in poisons:
            log.error(
                "%s quarantined %s (seq %d, %s): %s",
                poison.consumer,
                poison.subject,
                poison.seq,
                poison.event or "no name",
                poison.error,
            )
            await self._kv.put(poison.key, json.dumps(asdict(poison)).encode())

    async def entries(self) -> list[Poison]:
        """Everything quarantined, oldest first. Read with a pull consumer on the bucket's
        stream (the last message of each key, until none is pending): nats-py's ``keys()``
        watcher was seen to answer short while other writers were busy."""
        stream = f"KV_{QUARANTINE_BUCKET}"
        info = await self._js.stream_info(stream)
        if not info.state.messages:
            return []
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
            ack_policy=api.AckPolicy.NONE,
            filter_subject=f"$KV.{QUARANTINE_BUCKET}.>",
            inactive_threshold=30.0,
            mem_storage=True,
            num_replicas=1,
        )
        consumer = await self._js.add_consumer(stream, config)
        name = consumer.name
        found: list[Poison] = []
        try:
            sub = await self._js.pull_subscribe_bind(name, stream=stream)
            try:
                pending = 1
                while pending:
                    try:
                        batch = await sub.fetch(256, timeout=2.0)
                    except TimeoutError:
                        break
                    for msg in batch:
                        pending = msg.metadata.num_pending
                        operation = (msg.headers or {}).get("KV-Operation")
                        if operation is None and msg.data:
                            found.append(Poison(**json.loads(msg.data)))
            finally:
                await sub.unsubscribe()
        finally:
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await self._js.delete_consumer(stream, name)
        return sorted(found, key=lambda p: (p.seq, p.consumer))

    async def release(self, consumer: str, seq: int) -> bool:
        """Forget one entry (after the consumer was fixed, or the aggregate written off):
        a consumer that meets the event again quarantines it again."""
        key = Poison(seq, consumer, "", "", "", "").key
        try:
            await self._kv.get(key)
        except nats.js.errors.KeyNotFoundError:
            return False
        await self._kv.delete(key)
        return True

    async def release_subject(self, consumer: str, subject: str) -> int:
        """Forget every entry ``consumer`` holds for ``subject`` (corrected); how many."""
        released = 0
        for poison in await self.entries():
            if poison.consumer == consumer and poison.subject == subject:
                released += await self.release(consumer, poison.seq)
        return released


async def record_quietly(quarantine: Quarantine | None, poisons: list[Poison]) -> None:
    """Record, never failing the consumer: the aggregate is held in memory either way, and a
    consumer that restarts meets the event again and records it then."""
    if not poisons:
        return
    if quarantine is None:
        for poison in poisons:
            log.error("%s could not fold %s (seq %d): %s", poison.consumer, poison.subject,
                      poison.seq, poison.error)  # fmt: skip
        return
    try:
        await quarantine.record(poisons)
    except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
        log.error("could not record %d quarantined event(s): %r", len(poisons), exc)
