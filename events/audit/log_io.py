"""Reading the log and its seals from NATS, for the sealer and the verifier: every message of
``JY_EVENTS`` in order, raw (no decoding: the chain covers stored bytes), and the seals of
``JY_SEALS``. Reads only.

The whole log is read through an ordered push consumer (``PushTail``): the server pushes, a
callback collects each message without an await, and a reader takes what has arrived in
batches: about three times the rate of the pull fetch under ``events.tail``, which waits on
every message (``bench.audit``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api

from events.audit.chain import LogMessage
from events.audit.seals import Seal, SealError
from events.bus import Bus
from events.tail import Tail
from schemas.subjects import EVENTS_STREAM, SEALS_STREAM, SEALS_SUBJECT, events_of

BATCH = 512
FETCH_TIMEOUT_S = 2.0
INACTIVE_S = 60.0


async def stream_end(bus: Bus, stream: str = EVENTS_STREAM) -> int:
    """The stream's last position now."""
    info = await bus.js.stream_info(stream)
    return int(info.state.last_seq)


class PushTail:
    """``JY_EVENTS`` from a position on, in order, through an ordered push consumer (the
    client library recreates it after a gap or a lost consumer, from the next position).

    For readers faster than the server pushes (hashing, writing a file, the sealer): the client
    holds what the reader has not taken yet with no limit, since nats-py drops a message past
    its limits *after* counting it delivered, which the ordered consumer cannot notice (a
    silent gap). What it holds is what the reader lags by: a batch or two for these."""

    def __init__(self, bus: Bus, *, from_seq: int = 1) -> None:
        self._bus = bus
        self._from = max(from_seq, 1)
        self._arrived: list[LogMessage] = []
        self._ready = asyncio.Event()
        self._sub: JetStreamContext.PushSubscription | None = None

    async def _open(self) -> None:
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=self._from,
            inactive_threshold=INACTIVE_S,
        )  # fmt: skip
        self._sub = await self._bus.js.subscribe(
            events_of(), stream=EVENTS_STREAM, config=config, ordered_consumer=True,
            cb=self._take, pending_msgs_limit=0, pending_bytes_limit=0,
        )  # fmt: skip

    async def _take(self, msg: Msg) -> None:
        self._arrived.append(
            LogMessage(msg.metadata.sequence.stream, msg.subject, msg.headers or {}, msg.data)
        )
        self._ready.set()

    async def fetch(self, timeout: float) -> list[LogMessage]:
        """What arrived since the last call, waiting up to ``timeout`` when nothing has."""
        if self._sub is None:
            await self._open()
        if not self._arrived:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), timeout)
        taken, self._arrived = self._arrived, []
        self._ready.clear()
        return taken

    async def close(self) -> None:
        """Unsubscribe and delete the consumer now (it would expire on its own, later): the
        server's consumer count stays flat when readers come and go."""
        sub, self._sub = self._sub, None
        if sub is None or self._bus.nc.is_closed:
            return
        name = None
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
            name = (await sub.consumer_info()).name
        with contextlib.suppress(nats.errors.Error):
            await sub.unsubscribe()
        if name is not None:
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                await self._bus.js.delete_consumer(EVENTS_STREAM, name)


async def read_messages(
    bus: Bus, *, after: int = 0, until: int | None = None
) -> AsyncIterator[list[LogMessage]]:
    """The log's messages after position ``after`` up to ``until`` (the end as read now when
    not given), in batches, in order."""
    end = await stream_end(bus) if until is None else until
    if end <= after:
        return
    tail = PushTail(bus, from_seq=after + 1)
    position = after
    try:
        while position < end:
            arrived = await tail.fetch(FETCH_TIMEOUT_S)
            if arrived:
                position = arrived[-1].seq
            batch = [m for m in arrived if m.seq <= end]
            if batch:
                yield batch
    finally:
        await tail.close()


async def read_seals(bus: Bus) -> list[Seal]:
    """Every seal, in the order stored."""
    end = await stream_end(bus, SEALS_STREAM)
    seals: list[Seal] = []
    if end == 0:
        return seals
    tail = Tail(bus, stream=SEALS_STREAM, subjects=[SEALS_SUBJECT], batch=BATCH)
    try:
        while tail.position < end:
            for message in await tail.fetch_raw(FETCH_TIMEOUT_S):
                seals.append(_seal_at(message.seq, message.data))
    finally:
        await tail.close()
    return seals


async def last_seal(bus: Bus) -> tuple[Seal, int] | None:
    """The newest seal and its position in ``JY_SEALS`` (what the next seal guards on)."""
    try:
        msg = await bus.js.get_last_msg(SEALS_STREAM, SEALS_SUBJECT)
    except nats.js.errors.NotFoundError:
        return None
    seq = int(msg.seq or 0)
    return _seal_at(seq, msg.data or b""), seq


def _seal_at(seq: int, data: bytes) -> Seal:
    try:
        return Seal.from_bytes(data)
    except SealError as exc:
        raise SealError(f"{SEALS_STREAM} position {seq}: {exc}") from exc
