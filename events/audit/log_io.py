"""Reading the log and its seals from NATS, for the sealer and the verifier: every message of
``JY_EVENTS`` in order, raw (no decoding: the chain covers stored bytes), and the seals of
``JY_SEALS``. Reads only."""

from __future__ import annotations

from collections.abc import AsyncIterator

import nats.js.errors

from events.audit.chain import LogMessage
from events.audit.seals import Seal, SealError
from events.bus import Bus
from events.tail import Tail
from schemas.subjects import EVENTS_STREAM, SEALS_STREAM, SEALS_SUBJECT, events_of

BATCH = 512
FETCH_TIMEOUT_S = 2.0


async def stream_end(bus: Bus, stream: str = EVENTS_STREAM) -> int:
    """The stream's last position now."""
    info = await bus.js.stream_info(stream)
    return int(info.state.last_seq)


async def read_messages(
    bus: Bus, *, after: int = 0, until: int | None = None
) -> AsyncIterator[list[LogMessage]]:
    """The log's messages after position ``after`` up to ``until`` (the end as read now when
    not given), in batches, in order."""
    end = await stream_end(bus) if until is None else until
    if end <= after:
        return
    tail = Tail(bus, from_seq=after + 1, subjects=[events_of()], batch=BATCH)
    try:
        while tail.position < end:
            raw = await tail.fetch_raw(FETCH_TIMEOUT_S)
            batch = [LogMessage(m.seq, m.subject, m.headers, m.data) for m in raw if m.seq <= end]
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
