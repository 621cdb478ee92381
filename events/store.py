"""The event store on ``JY_EVENTS``: guarded appends, group commits, reads and the log's end.

Writes ``ev.<aggregate>.<id>`` (one guarded message, or one atomic batch over many aggregates);
reads them back with batched direct gets. Every write carries
``Nats-Expected-Last-Subject-Sequence`` on the first message of each aggregate. When an answer is
lost or ambiguous (timeout, 10201, 10071, 10164, 10176) the store reads the aggregates back and
looks for its own event ids before saying anything: a retried commit that had in fact been
stored is reported as stored, never as an error. A write that reaches no stream leader (an
election on a cluster, or no quorum) was certainly not stored: it is sent again for up to
``LEADERLESS_WAIT_S``, then refused as ``UnavailableError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from dataclasses import dataclass, field

import nats.errors
from nats.js.errors import APIError, ServiceUnavailableError

import events.domain  # noqa: F401  (fills the catalogue, so reads are upcast)
from events.bus import LEADERLESS_ERR_CODES, Bus, is_leaderless
from events.catalogue import CATALOGUE, UnknownEventError
from events.direct import DirectReader, RawMessage
from events.envelope import Envelope, StoredEvent
from events.metrics import count_appended
from events.writes import (
    AggregateRef,
    Committed,
    ConcurrencyConflict,
    History,
    OutcomeUnknownError,
    UnavailableError,
    Write,
    WriteRejectedError,
    encode,
    validate_group,
)
from schemas.subjects import EVENT_ID_HEADER, EVENT_NAME_HEADER, EVENTS_STREAM, events_of

log = logging.getLogger(__name__)

WRONG_LAST_SEQUENCE = 10071
WRONG_LAST_SEQUENCE_IN_BATCH = 10164  # a batch's guard, said without the sequence
BATCH_INCOMPLETE = 10176
BATCH_DUPLICATE_MSG_ID = 10201
EXPECTED_HEADER = "Nats-Expected-Last-Subject-Sequence"
LEADERLESS_WAIT_S = 3.0
"""How long a write that reaches no stream leader is tried again before it is refused as
``UnavailableError``: long enough for an election after a member is lost (about 2 s with the
server's defaults), short enough that a log without quorum is said to be so quickly."""
LEADERLESS_PAUSE_S = 0.25
# Errors after which the write may or may not have been stored: resolve by reading back.
AMBIGUOUS_CODES = frozenset(
    {WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_IN_BATCH, BATCH_INCOMPLETE, BATCH_DUPLICATE_MSG_ID}
)


@dataclass
class StoreStats:
    appends: int = 0
    batches: int = 0
    recovered: int = 0
    conflicts: int = 0
    retries: int = 0
    leaderless: int = 0
    """Tries that reached no stream leader (an election, or no quorum)."""
    read_requests: int = field(default=0)


class MisfiledEventError(ValueError):
    """An envelope that names another aggregate than the subject it was stored on."""


def decode(message: RawMessage) -> StoredEvent:
    envelope = Envelope.model_validate_json(message.data)
    if envelope.subject != message.subject:
        # Folded by its envelope it would change an aggregate its subject's guard never saw.
        raise MisfiledEventError(
            f"the envelope names {envelope.subject} but it was stored on {message.subject}"
        )
    # An unknown name was written by newer code: it passes through, readers skip it.
    with contextlib.suppress(UnknownEventError):
        envelope = CATALOGUE.upcast(envelope)
    return StoredEvent(seq=message.seq, envelope=envelope)


class EventStore:
    def __init__(
        self,
        bus: Bus,
        *,
        max_open_batches: int = 8,
        ack_timeout: float | None = None,
        max_attempts: int = 3,
        leaderless_wait: float = LEADERLESS_WAIT_S,
    ) -> None:
        self._bus = bus
        # The server keeps at most 50 open batches per stream and silently drops the rest;
        # a writer keeps a few open at a time so its batches never meet that limit.
        self._open_batches = asyncio.Semaphore(max_open_batches)
        self._ack_timeout = ack_timeout or bus.settings.request_timeout_s
        self._max_attempts = max_attempts
        self._leaderless_wait = leaderless_wait
        self._max_bytes = bus.settings.max_event_bytes
        self.reader = DirectReader(bus.replies, EVENTS_STREAM, timeout=self._ack_timeout)
        self.stats = StoreStats()

    # ---- writing -------------------------------------------------------------------------

    async def append(self, write: Write) -> Committed:
        """Store one aggregate's new events (one message, or an atomic batch if several)."""
        return await self.commit([write])

    async def commit(self, writes: list[Write]) -> Committed:
        """Group commit: all of ``writes`` are stored, or none (ConcurrencyConflict names the
        stale aggregates). At most 1,000 events, each aggregate at most once."""
        validate_group(writes)
        payloads = [[self._encode(e) for e in w.events] for w in writes]
        loop = asyncio.get_running_loop()
        leaderless_until = loop.time() + self._leaderless_wait
        attempt = 0
        while attempt < self._max_attempts:
            attempt += 1
            try:
                if len(writes) == 1 and len(writes[0].events) == 1:
                    committed = await self._publish_one(writes[0], payloads[0][0])
                else:
                    committed = await self._publish_batch(writes, payloads)
                count_appended(writes)
                return committed
            except (TimeoutError, nats.errors.TimeoutError) as exc:
                reason = f"no answer ({type(exc).__name__})"
            except _Ambiguous as exc:
                reason = str(exc)
            except Exception as exc:
                if not is_leaderless(exc):
                    raise
                # Nobody could store it (an election, or no quorum): certainly not stored.
                # Wait out an election; no quorum after that is said as such.
                self.stats.leaderless += 1
                if loop.time() > leaderless_until:
                    raise UnavailableError(
                        f"the log has no leader for {writes[0].aggregate.subject} "
                        f"({type(exc).__name__}); nothing was stored"
                    ) from exc
                attempt -= 1
                await asyncio.sleep(LEADERLESS_PAUSE_S)
                continue
            resolved = await self._resolve(writes, reason)
            if resolved is not None:
                count_appended(writes)  # stored by an earlier attempt of this very write
                return resolved
            # Not stored and every guard still holds: sending it again is safe.
            self.stats.retries += 1
            log.warning("write not stored after %s; retrying (%d)", reason, attempt)
        raise OutcomeUnknownError(
            f"gave up after {self._max_attempts} attempts; the write was not stored"
        )

    def _encode(self, envelope: Envelope) -> bytes:
        return encode(envelope, self._max_bytes)

    @staticmethod
    def _headers(envelope: Envelope) -> dict[str, str]:
        return {EVENT_NAME_HEADER: envelope.name, EVENT_ID_HEADER: envelope.event_id}

    async def _publish_one(self, write: Write, data: bytes) -> Committed:
        headers = self._headers(write.events[0])
        headers[EXPECTED_HEADER] = str(write.expected_seq)
        self.stats.appends += 1
        try:
            ack = await self._bus.js.publish(
                write.aggregate.subject, data, timeout=self._ack_timeout, headers=headers
            )
        except APIError as exc:
            if is_leaderless(exc):
                raise
            raise _classify(exc.err_code or 0, exc.description or "") from exc
        return Committed(seqs=(ack.seq,), last_seqs={write.aggregate: ack.seq})

    async def _publish_batch(self, writes: list[Write], payloads: list[list[bytes]]) -> Committed:
        batch_id = uuid.uuid4().hex
        total = sum(len(p) for p in payloads)
        nc = self._bus.nc
        self.stats.batches += 1
        async with self._open_batches:
            n = 0
            for write, datas in zip(writes, payloads, strict=True):
                for index, (envelope, data) in enumerate(zip(write.events, datas, strict=True)):
                    n += 1
                    headers = self._headers(envelope)
                    headers["Nats-Batch-Id"] = batch_id
                    headers["Nats-Batch-Sequence"] = str(n)
                    if index == 0:
                        # Only the first message of an aggregate may carry the guard: a later
                        # one would be checked against the pre-batch state and fail (10164).
                        headers[EXPECTED_HEADER] = str(write.expected_seq)
                    if n < total:
                        await nc.publish(write.aggregate.subject, data, headers=headers)
                    else:
                        headers["Nats-Batch-Commit"] = "1"
                        reply = await nc.request(
                            write.aggregate.subject,
                            data,
                            timeout=self._ack_timeout,
                            headers=headers,
                        )
        answer = json.loads(reply.data)
        if "error" in answer:
            error = answer["error"]
            code, description = int(error.get("err_code", 0)), str(error.get("description", ""))
            if int(error.get("code", 0)) == 503 or code in LEADERLESS_ERR_CODES:
                raise ServiceUnavailableError(code=503, err_code=code, description=description)
            raise _classify(code, description)
        last = int(answer["seq"])
        return _committed(writes, first_seq=last - total + 1)

    async def _resolve(self, writes: list[Write], reason: str) -> Committed | None:
        """After an ambiguous answer: stored (our ids are there), stale, or safe to resend."""
        first = writes[0]
        try:
            after = await self.reader.read_subject(
                first.aggregate.subject, from_seq=first.expected_seq + 1, limit=1
            )
            mine = after and after[0].headers.get(EVENT_ID_HEADER) == first.events[0].event_id
            if mine and await self._ours_from(writes, after[0].seq):
                self.stats.recovered += 1
                log.info("write was stored although the answer said %s", reason)
                return _committed(writes, first_seq=after[0].seq, recovered=True)
            lasts = await self.reader.last_of([w.aggregate.subject for w in writes])
        except (TimeoutError, nats.errors.Error) as exc:
            raise OutcomeUnknownError(
                f"{reason}, and reading back failed ({exc!r}); retry the same write"
            ) from exc
        stale = {
            w.aggregate: (lasts[w.aggregate.subject].seq if w.aggregate.subject in lasts else 0)
            for w in writes
        }
        stale = {ref: seq for ref, seq in stale.items() if seq != _expected(writes, ref)}
        if stale:
            self.stats.conflicts += 1
            raise ConcurrencyConflict(stale)
        return None

    async def _ours_from(self, writes: list[Write], seq: int) -> bool:
        """Whether the batch stored from ``seq`` is this write, event for event. Another
        writer's decision can begin with the same event (same cause, same version) and still
        differ after it (e.g. one reservation naming more sessions)."""
        ours = [e.event_id for w in writes for e in w.events]
        if len(ours) == 1:
            return True
        stored = await self.reader.read_subject(events_of(), from_seq=seq, limit=len(ours))
        return [m.headers.get(EVENT_ID_HEADER) for m in stored] == ours

    # ---- reading -------------------------------------------------------------------------

    async def read(self, aggregate: AggregateRef, *, after_seq: int = 0) -> History:
        """The aggregate's events after ``after_seq`` (all of them by default), upcast."""
        messages = await self.reader.read_subject(aggregate.subject, from_seq=after_seq + 1)
        events = [decode(m) for m in messages]
        return History(aggregate, events, events[-1].seq if events else after_seq)

    async def last_seqs(self, aggregates: list[AggregateRef]) -> dict[AggregateRef, int]:
        """Each aggregate's current guard (0 for one that does not exist), in one request."""
        lasts = await self.reader.last_of([a.subject for a in aggregates])
        return {a: (lasts[a.subject].seq if a.subject in lasts else 0) for a in aggregates}

    async def stream_last_seq(self) -> int:
        """The log's end now: a consumer that has folded up to here has caught up."""
        info = await self._bus.js.stream_info(EVENTS_STREAM)
        return int(info.state.last_seq)


class _Ambiguous(Exception):
    pass


def _classify(code: int, description: str) -> Exception:
    if code in AMBIGUOUS_CODES:
        return _Ambiguous(f"error {code}: {description}")
    return WriteRejectedError(f"the server refused the write: error {code}: {description}")


def _expected(writes: list[Write], ref: AggregateRef) -> int:
    return next(w.expected_seq for w in writes if w.aggregate == ref)


def _committed(writes: list[Write], *, first_seq: int, recovered: bool = False) -> Committed:
    # A batch's messages are stored contiguously, in the order they were sent.
    seqs: list[int] = []
    last_seqs: dict[AggregateRef, int] = {}
    seq = first_seq
    for write in writes:
        for _ in write.events:
            seqs.append(seq)
            seq += 1
        last_seqs[write.aggregate] = seqs[-1]
    return Committed(seqs=tuple(seqs), last_seqs=last_seqs, recovered=recovered)
