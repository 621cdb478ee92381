"""Loading aggregates from the event store (snapshot + the events after it, in one read) and
turning their decisions into guarded writes. Reads ``ev.<aggregate>.<id>``; writes nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from commands.aggregate import Aggregate
from events.envelope import Cause
from events.snapshots import Snapshot
from events.writes import AggregateRef, History, Write

A = TypeVar("A", bound=Aggregate)


class EventReader(Protocol):
    """What loading needs from ``EventStore``: one read of an aggregate's tail."""

    async def read(self, aggregate: AggregateRef, *, after_seq: int = 0) -> History: ...


class SnapshotReader(Protocol):
    async def load(self, aggregate: AggregateRef) -> Snapshot | None: ...


@dataclass(frozen=True, slots=True)
class Loaded(Generic[A]):
    """An aggregate (None: it does not exist) and the guard for writing after it: the stream
    sequence of its last stored event, 0 if there is none."""

    aggregate: A | None
    last_seq: int


async def load(
    store: EventReader,
    cls: type[A],
    aggregate_id: str,
    snapshots: SnapshotReader | None = None,
) -> Loaded[A]:
    """The aggregate as stored: its snapshot, if any, then every event after the snapshot's
    sequence in one read (never one request per event)."""
    ref = AggregateRef(cls.aggregate_type, aggregate_id)
    snapshot = await snapshots.load(ref) if snapshots is not None else None
    history = await store.read(ref, after_seq=snapshot.seq if snapshot is not None else 0)
    aggregate = cls.rehydrate((e.envelope for e in history.events), snapshot)
    return Loaded(aggregate, history.last_seq)


def pending_write(loaded: Loaded[A] | tuple[A, int], cause: Cause) -> Write | None:
    """The aggregate's undecided events as one guarded write; None when the command changed
    nothing (an idempotent repeat), so there is nothing to append."""
    aggregate, last_seq = (
        (loaded.aggregate, loaded.last_seq) if isinstance(loaded, Loaded) else loaded
    )
    if aggregate is None:
        raise ValueError("there is no aggregate to write")
    envelopes = aggregate.collect(cause)
    if not envelopes:
        return None
    if last_seq == 0:
        return Write.create(aggregate.ref, *envelopes)
    return Write.after(aggregate.ref, last_seq, *envelopes)
