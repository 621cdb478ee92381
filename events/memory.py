"""An event store in memory with the JetStream store's rules, for unit tests of deciders and
pass steps: expected last sequence per aggregate, create-once, atomic group commits that store
all or nothing and name every stale aggregate, reads upcast to the current schema.

Events go through the same JSON encoding as on the wire (and the same size limit), so what a
test reads back is what a reader of ``JY_EVENTS`` would see. ``fail_next`` makes the next
commit end in ``OutcomeUnknownError``, stored or not, as a lost answer would.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass

import events.domain  # noqa: F401  (fills the catalogue, so reads are upcast)
from events.catalogue import CATALOGUE, UnknownEventError
from events.envelope import Envelope, StoredEvent
from events.writes import (
    AggregateRef,
    Committed,
    ConcurrencyConflict,
    History,
    OutcomeUnknownError,
    Write,
    encode,
    validate_group,
)

DEFAULT_MAX_EVENT_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class _Fault:
    stored: bool


class InMemoryStore:
    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max_bytes = max_event_bytes
        self._log: list[tuple[str, bytes]] = []
        """(subject, encoded envelope) in stream order: sequence = index + 1."""
        self._by_subject: dict[str, list[int]] = {}
        self._faults: deque[_Fault] = deque()
        self.commits = 0

    # ---- writing -------------------------------------------------------------------------

    async def append(self, write: Write) -> Committed:
        return await self.commit([write])

    async def commit(self, writes: list[Write]) -> Committed:
        validate_group(writes)
        encoded = [[self._encode(e) for e in w.events] for w in writes]
        fault = self._faults.popleft() if self._faults else None
        if fault is not None and not fault.stored:
            raise OutcomeUnknownError("injected: no answer, and nothing was stored")
        stale = {
            w.aggregate: self._last(w.aggregate.subject)
            for w in writes
            if self._last(w.aggregate.subject) != w.expected_seq
        }
        if stale:
            raise ConcurrencyConflict(stale)
        seqs: list[int] = []
        last_seqs: dict[AggregateRef, int] = {}
        for write, datas in zip(writes, encoded, strict=True):
            subject = write.aggregate.subject
            for data in datas:
                self._log.append((subject, data))
                seq = len(self._log)
                self._by_subject.setdefault(subject, []).append(seq)
                seqs.append(seq)
            last_seqs[write.aggregate] = seqs[-1]
        self.commits += 1
        if fault is not None:
            raise OutcomeUnknownError("injected: the write was stored, but the answer was lost")
        return Committed(seqs=tuple(seqs), last_seqs=last_seqs)

    def fail_next(self, *, stored: bool) -> None:
        """Make the next commit raise ``OutcomeUnknownError``, after storing it or not."""
        self._faults.append(_Fault(stored))

    def _encode(self, envelope: Envelope) -> bytes:
        return encode(envelope, self._max_bytes)

    def _last(self, subject: str) -> int:
        seqs = self._by_subject.get(subject)
        return seqs[-1] if seqs else 0

    # ---- reading -------------------------------------------------------------------------

    async def read(self, aggregate: AggregateRef, *, after_seq: int = 0) -> History:
        found = [
            self._decode(seq)
            for seq in self._by_subject.get(aggregate.subject, [])
            if seq > after_seq
        ]
        return History(aggregate, found, found[-1].seq if found else after_seq)

    async def last_seqs(self, aggregates: list[AggregateRef]) -> dict[AggregateRef, int]:
        return {a: self._last(a.subject) for a in aggregates}

    async def stream_last_seq(self) -> int:
        return len(self._log)

    def events(self, *, after_seq: int = 0) -> list[StoredEvent]:
        """Every stored event after ``after_seq``, in stream order (what a tail would fold)."""
        return [self._decode(seq) for seq in range(after_seq + 1, len(self._log) + 1)]

    def _decode(self, seq: int) -> StoredEvent:
        envelope = Envelope.model_validate_json(self._log[seq - 1][1])
        with contextlib.suppress(UnknownEventError):
            envelope = CATALOGUE.upcast(envelope)
        return StoredEvent(seq=seq, envelope=envelope)
