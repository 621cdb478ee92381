"""Read ``JY_EVENTS`` (or another stream, e.g. ``JY_OUTPUT``) in order from a sequence, in
batches: the ordered-consumer reader.

Reads ``ev.>`` (or narrower filters) through an ephemeral pull consumer with no acks, fetched
up to 256 messages at a time. It is "ordered" the way nats' ordered consumers are: it tracks the
consumer sequence, and if a message is skipped or the consumer vanishes (server restart,
inactivity) it recreates the consumer from the last delivered stream sequence + 1.
Live feeds must use this, never a core subscription to ``ev.>`` (which also sees refused writes).
"""

from __future__ import annotations

import contextlib
import logging

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from events.bus import Bus
from events.direct import RawMessage
from events.envelope import StoredEvent
from events.store import decode
from schemas.subjects import EVENT_NAME_HEADER, EVENTS_STREAM, events_of

log = logging.getLogger(__name__)


class Tail:
    def __init__(
        self,
        bus: Bus,
        *,
        from_seq: int = 1,
        subjects: list[str] | None = None,
        batch: int = 256,
        names: frozenset[str] | None = None,
        stream: str = EVENTS_STREAM,
    ) -> None:
        self._bus = bus
        self._stream = stream
        self._subjects = subjects or [events_of()]
        self._batch = batch
        self._names = names
        self.position = max(from_seq, 1) - 1
        """The last stream sequence delivered (or skipped by the name filter)."""
        self.pending = -1
        """Messages the consumer still had after the last delivered one, or when it was opened
        (-1: not known yet)."""
        self._sub: JetStreamContext.PullSubscription | None = None
        self._consumer: str | None = None
        self._consumer_seq = 0

    async def _open(self) -> JetStreamContext.PullSubscription:
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.position + 1,
            ack_policy=api.AckPolicy.NONE,
            inactive_threshold=60.0,
            mem_storage=True,
            num_replicas=1,
            filter_subjects=self._subjects if len(self._subjects) > 1 else None,
            filter_subject=self._subjects[0] if len(self._subjects) == 1 else None,
        )
        self._consumer_seq = 0
        self._consumer = config.name = self._bus.nc.new_inbox().rsplit(".", 1)[1]
        info = await self._bus.js.add_consumer(self._stream, config)
        self.pending = int(info.num_pending or 0)
        self._sub = await self._bus.js.pull_subscribe_bind(self._consumer, stream=self._stream)
        return self._sub

    async def _reset(self, why: str) -> None:
        log.info("tail restarts at %d: %s", self.position + 1, why)
        await self.close()

    async def fetch_raw(self, timeout: float = 1.0) -> list[RawMessage]:
        """The next batch in stream order, undecoded; [] if none arrived within ``timeout``."""
        sub = self._sub or await self._open()
        try:
            msgs = await sub.fetch(self._batch, timeout=timeout)
        except TimeoutError:  # nats-py raises its own and, on some paths, asyncio's
            return []
        except (nats.js.errors.NotFoundError, nats.js.errors.ServiceUnavailableError) as exc:
            await self._reset(f"consumer lost ({exc!r})")
            return []
        out: list[RawMessage] = []
        for msg in msgs:
            meta = msg.metadata
            if meta.sequence.consumer != self._consumer_seq + 1:
                await self._reset(f"gap after consumer seq {self._consumer_seq}")
                break
            self._consumer_seq = meta.sequence.consumer
            self.position = meta.sequence.stream
            self.pending = meta.num_pending
            if self._names is not None and _name(msg) not in self._names:
                continue
            out.append(_raw(msg, meta.sequence.stream))
        return out

    async def fetch(self, timeout: float = 1.0) -> list[StoredEvent]:
        """The next batch in stream order, decoded and upcast; [] if none within ``timeout``."""
        return [decode(m) for m in await self.fetch_raw(timeout)]

    async def fetch_readable(self, timeout: float = 1.0) -> list[StoredEvent]:
        """``fetch`` for live feeds: an event that cannot be decoded (malformed, misfiled) is
        logged and left out instead of ending the feed; the consumers that fold it quarantine
        it (``events/quarantine.py``), a feed has nothing to hold."""
        out = []
        for message in await self.fetch_raw(timeout):
            try:
                out.append(decode(message))
            except ValueError as exc:  # pydantic's ValidationError and MisfiledEventError too
                log.warning("live feed skips seq %d on %s: %s", message.seq, message.subject, exc)
        return out

    async def num_pending(self) -> int:
        """How many matching messages lie beyond the position right now."""
        if self._sub is None:
            await self._open()
            return self.pending  # the server's count as it made the consumer: no second ask
        # fetch() asks for a bounded batch and hands over all of it, so what the server still
        # counts as pending is exactly what this reader has not seen.
        info = await self._sub.consumer_info()
        return int(info.num_pending or 0)

    async def close(self) -> None:
        sub, self._sub = self._sub, None
        consumer, self._consumer = self._consumer, None
        if sub is not None:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        if consumer is not None and not self._bus.nc.is_closed:
            # Ephemeral consumers also expire on their own (inactive_threshold); deleting
            # them now keeps the server's consumer count flat when readers come and go.
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await self._bus.js.delete_consumer(self._stream, consumer)


def _name(msg: Msg) -> str | None:
    return (msg.headers or {}).get(EVENT_NAME_HEADER)


def _raw(msg: Msg, seq: int) -> RawMessage:
    return RawMessage(seq=seq, subject=msg.subject, data=msg.data, headers=msg.headers or {})
