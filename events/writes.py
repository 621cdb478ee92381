"""What a writer hands the store: guarded writes. There is no way to express an unguarded one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from events.envelope import Envelope, StoredEvent
from schemas.subjects import AggregateType, event_subject

MAX_BATCH_MESSAGES = 1000  # the server's ceiling for one atomic batch


@dataclass(frozen=True, slots=True)
class AggregateRef:
    type: AggregateType
    id: str

    @property
    def subject(self) -> str:
        return event_subject(self.type, self.id)

    def __str__(self) -> str:
        return f"{self.type.value}/{self.id}"


@dataclass(frozen=True, slots=True)
class Write:
    """New events for one aggregate, guarded by the aggregate's last stream sequence.

    ``expected_seq`` is the sequence of the aggregate's last stored event as the writer saw it;
    0 means "this aggregate must not exist yet" (create-once, forever). It has no default: a
    write without a guard cannot be built.
    """

    aggregate: AggregateRef
    expected_seq: int
    events: tuple[Envelope, ...]

    def __post_init__(self) -> None:
        if self.expected_seq < 0:
            raise ValueError(f"expected_seq must be >= 0, got {self.expected_seq}")
        if not self.events:
            raise ValueError(f"a write to {self.aggregate} needs at least one event")
        versions = [e.aggregate_version for e in self.events]
        if versions != list(range(versions[0], versions[0] + len(versions))):
            raise ValueError(f"event versions for {self.aggregate} must be consecutive: {versions}")
        for envelope in self.events:
            if (envelope.aggregate_type, envelope.aggregate_id) != (
                self.aggregate.type,
                self.aggregate.id,
            ):
                raise ValueError(
                    f"event {envelope.event_id} belongs to "
                    f"{envelope.aggregate_type.value}/{envelope.aggregate_id}, not {self.aggregate}"
                )

    @classmethod
    def create(cls, aggregate: AggregateRef, *events: Envelope) -> Write:
        return cls(aggregate, 0, tuple(events))

    @classmethod
    def after(cls, aggregate: AggregateRef, expected_seq: int, *events: Envelope) -> Write:
        return cls(aggregate, expected_seq, tuple(events))


@dataclass(frozen=True, slots=True)
class Committed:
    """A stored write or group commit: each event's sequence, and each aggregate's new guard."""

    seqs: tuple[int, ...]
    last_seqs: dict[AggregateRef, int]
    recovered: bool = False
    """True when the first answer was lost and the store found its own events by reading back."""


@dataclass(frozen=True, slots=True)
class History:
    """An aggregate's events after some sequence, and the guard to write after them."""

    aggregate: AggregateRef
    events: list[StoredEvent]
    last_seq: int


class Store(Protocol):
    """What writers and loaders need from an event store. Two implementations keep the same
    rules (one contract test suite runs on both): ``events.store.EventStore`` on JetStream and
    ``events.memory.InMemoryStore`` for unit tests of deciders and pass steps.

    - ``commit`` stores every write or none: a guard that no longer holds raises
      ``ConcurrencyConflict`` naming every stale aggregate; expected sequence 0 means the
      aggregate must not exist (create-once, forever);
    - ``OutcomeUnknownError`` means the store could not learn whether it stored the write;
    - reads return events upcast to the current schema, with the guard to write after them.
    """

    async def append(self, write: Write) -> Committed: ...

    async def commit(self, writes: list[Write]) -> Committed: ...

    async def read(self, aggregate: AggregateRef, *, after_seq: int = 0) -> History: ...

    async def last_seqs(self, aggregates: list[AggregateRef]) -> dict[AggregateRef, int]: ...

    async def stream_last_seq(self) -> int: ...


class StoreAround:
    """A ``Store`` that hands everything to ``store``: the base of a wrapper, which overrides
    what it changes (``commit``; ``append`` goes through ``commit``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def append(self, write: Write) -> Committed:
        return await self.commit([write])

    async def commit(self, writes: list[Write]) -> Committed:
        return await self.store.commit(writes)

    async def read(self, aggregate: AggregateRef, *, after_seq: int = 0) -> History:
        return await self.store.read(aggregate, after_seq=after_seq)

    async def last_seqs(self, aggregates: list[AggregateRef]) -> dict[AggregateRef, int]:
        return await self.store.last_seqs(aggregates)

    async def stream_last_seq(self) -> int:
        return await self.store.stream_last_seq()


class ConcurrencyConflict(Exception):
    """Another writer got there first. Nothing of the write was stored.

    ``stale`` maps each aggregate whose guard no longer held to its actual last sequence (0 if it
    does not exist): reload those, decide again, write again.
    """

    def __init__(self, stale: dict[AggregateRef, int]) -> None:
        self.stale = stale
        names = ", ".join(f"{ref} (now at {seq})" for ref, seq in stale.items())
        super().__init__(f"stale guard on {names or 'an aggregate that has since changed back'}")


class OutcomeUnknownError(Exception):
    """The store could not learn whether a write was stored (the server did not answer, and
    reading back failed too). Retrying the same write is safe: its guard decides."""


class UnavailableError(Exception):
    """The log could not take the write now: no stream leader (an election, or no quorum) or
    no server reachable. Nothing was stored; the same write may be tried again later."""


class WriteRejectedError(Exception):
    """The server refused a write for a reason retrying cannot fix (too large, bad stream)."""


def encode(envelope: Envelope, max_bytes: int) -> bytes:
    """The envelope as stored, refused before sending when it is over the size limit."""
    data = envelope.model_dump_json().encode()
    if len(data) > max_bytes:
        raise WriteRejectedError(
            f"event {envelope.name} for "
            f"{envelope.aggregate_type.value}/{envelope.aggregate_id} is {len(data)} bytes; "
            f"the limit is {max_bytes}"
        )
    return data


def validate_group(writes: list[Write]) -> None:
    if not writes:
        raise ValueError("a group commit needs at least one write")
    seen: set[AggregateRef] = set()
    for write in writes:
        if write.aggregate in seen:
            raise ValueError(
                f"{write.aggregate} appears twice in one group commit: "
                "merge its events into one write"
            )
        seen.add(write.aggregate)
    total = sum(len(w.events) for w in writes)
    if total > MAX_BATCH_MESSAGES:
        raise ValueError(
            f"a group commit holds at most {MAX_BATCH_MESSAGES} events, this one has {total}"
        )
