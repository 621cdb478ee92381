"""The one unit of work every writer uses: decide on working copies, store the decision in one
guarded write (one message, or atomic group commits), apply it from the ack, and after a
conflict or an unknown outcome fold what the store holds and decide again, a bounded number
of times. Writes whatever aggregates the decision changed, through a ``Store``.

A decision is a plain synchronous function of a ``Changes``: nothing is folded while it runs,
so every guard is the one its working copy was taken at. The folded state changes only
through stored events (here, from the ack; later, from the tail, whose echo is skipped), so a
decision that fails to commit leaves no trace in it.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar, overload

from commands.aggregate import Aggregate
from commands.outcome import Accepted, Decision
from events.envelope import Cause, Envelope, StoredEvent
from events.writes import (
    MAX_BATCH_MESSAGES,
    AggregateRef,
    Committed,
    ConcurrencyConflict,
    OutcomeUnknownError,
    Store,
    Write,
)

log = logging.getLogger(__name__)

A = TypeVar("A", bound=Aggregate)
R = TypeVar("R")


class Folded(Protocol):
    """The state a writer decides on: each aggregate's guard, and a way to fold one event
    (``events.fold.FoldedState`` is one)."""

    def guard(self, aggregate: AggregateRef) -> int: ...

    def apply(self, event: StoredEvent) -> bool: ...


class TooManyConflictsError(RuntimeError):
    """Deciding kept losing races (or kept meeting unknown outcomes); the caller tries later
    (a command runner retries the command with back-off, a pass is triggered again)."""


@overload
def working_copy(aggregate: A) -> A: ...
@overload
def working_copy(aggregate: None) -> None: ...
def working_copy(aggregate: A | None) -> A | None:
    """A copy to decide on. Aggregate values are frozen models; only their containers
    (allocations, history, the library's pending list) change in place, so copying those is
    enough, and far cheaper than a deep copy of a node with many allocations."""
    if aggregate is None:
        return None
    # What copy.copy does for an object with a __dict__ (none of the aggregates has slots or
    # its own __copy__), without its generic protocol: a quarter of the cost.
    clone = object.__new__(type(aggregate))
    state = clone.__dict__
    state.update(vars(aggregate))
    for name, value in state.items():
        if isinstance(value, list | dict | set):
            state[name] = value.copy() if type(value) in _PLAIN else copy.copy(value)
    return clone


_PLAIN = (list, dict, set)
"""Containers whose own ``copy`` gives their type back (a subclass's may not)."""


Batch = dict[AggregateRef, list[Envelope]]


class Changes:
    """One decision's scratch space: working copies with the guard each was taken at, and what
    the decision changed, collected in units that are never split between two batches."""

    def __init__(self, state: Folded, *, max_events: int = MAX_BATCH_MESSAGES) -> None:
        self.state = state
        self.max_events = max_events
        """Events per batch; a unit larger than this gets a batch of its own."""
        self.copies: dict[AggregateRef, Aggregate] = {}
        self._expected: dict[AggregateRef, int] = {}
        self.batches: list[Batch] = [{}]
        self._size = 0

    @property
    def events(self) -> int:
        return sum(len(envs) for batch in self.batches for envs in batch.values())

    def track(self, aggregate: A) -> A:
        """The working copy of a folded aggregate (the same one for the whole decision)."""
        ref = aggregate.ref
        if ref not in self.copies:
            self.copies[ref] = working_copy(aggregate)
            # The guard is the one the copy was taken at, not the state's at commit time:
            # an event folded in between must fail the write, not be overwritten.
            self._expected[ref] = self.state.guard(ref)
        found = self.copies[ref]
        assert isinstance(found, type(aggregate))
        return found

    def add(self, aggregate: A) -> A:
        """A new aggregate: its first write is create-once (expected sequence 0)."""
        self.copies[aggregate.ref] = aggregate
        self._expected[aggregate.ref] = 0
        return aggregate

    def seen(self, ref: AggregateRef) -> Aggregate | None:
        """The copy this decision holds of ``ref``, if it took one."""
        return self.copies.get(ref)

    def unit(self, cause: Cause, *aggregates: Aggregate) -> int:
        """Collect what one decision changed on ``aggregates``; returns the event count."""
        return self.joint([(cause, a) for a in aggregates])

    def joint(self, parts: Iterable[tuple[Cause, Aggregate]]) -> int:
        """Like ``unit``, for decisions that must be stored together although each aggregate
        has its own cause (sessions admitted in a pass and the one reservation per scope that
        names them all)."""
        return self.joint_collected([(a.ref, a.collect(cause)) for cause, a in parts])

    def joint_collected(self, collected: list[tuple[AggregateRef, list[Envelope]]]) -> int:
        """Like ``joint``, for events a decision collected itself, part by part (each with its
        own cause), that must still be stored together; an aggregate may appear more than once
        (its events stay in the order given)."""
        size = sum(len(envelopes) for _, envelopes in collected)
        if size == 0:
            return 0
        if self._size and self._size + size > self.max_events:
            self.batches.append({})
            self._size = 0
        batch = self.batches[-1]
        for ref, envelopes in collected:
            if envelopes:
                # An aggregate the decision changed without a working copy (a decider that
                # copies for itself) is guarded at the state's sequence now: still the
                # decision's own step, since nothing folds while a decision runs.
                self._expected.setdefault(ref, self.state.guard(ref))
                batch.setdefault(ref, []).extend(envelopes)
        self._size += size
        return size

    def refs(self) -> list[AggregateRef]:
        return [ref for batch in self.batches for ref in batch]

    def writes(self, batch: Batch) -> list[Write]:
        return [Write(ref, self._expected[ref], tuple(envs)) for ref, envs in batch.items()]

    def stored(self, writes: list[Write], committed: Committed) -> None:
        """Fold a stored batch into the state from its ack, and guard later batches after it."""
        seqs = iter(committed.seqs)
        for write in writes:
            for envelope in write.events:
                self.state.apply(StoredEvent(seq=next(seqs), envelope=envelope))
        self._expected.update(committed.last_seqs)


@dataclass(frozen=True, slots=True)
class Stored:
    """What a unit of work stored: each batch and its commit, in order."""

    batches: list[tuple[list[Write], Committed]] = field(default_factory=list)

    def merged(self) -> Committed:
        """All commits reported as one (what an outcome lists)."""
        commits = [c for _, c in self.batches]
        last: dict[AggregateRef, int] = {}
        for c in commits:
            last.update(c.last_seqs)
        seqs = tuple(seq for c in commits for seq in c.seqs)
        return Committed(seqs=seqs, last_seqs=last, recovered=any(c.recovered for c in commits))

    def seqs_by_aggregate(self) -> dict[AggregateRef, list[int]]:
        """The stored sequences of each aggregate (a batch stores its writes' events
        contiguously, in order)."""
        found: dict[AggregateRef, list[int]] = {}
        for writes, committed in self.batches:
            seqs = iter(committed.seqs)
            for write in writes:
                found.setdefault(write.aggregate, []).extend(next(seqs) for _ in write.events)
        return found


def answer(decision: Decision, stored: Stored) -> Decision:
    """A command's answer: an acceptance names the events the unit of work stored (none when
    the decision changed nothing); a refusal is as decided."""
    if isinstance(decision, Accepted) and stored.batches:
        return Accepted.of(stored.merged(), decision.message)
    return decision


C = TypeVar("C", bound=Changes)


class UnitOfWork(Generic[C]):
    """Decide, commit, and on a conflict or an unknown outcome refresh and decide again.

    ``changes`` makes a fresh scratch space per attempt. ``lock`` is held from deciding to
    stored: writers of one process that share aggregates (a create and a pass both write a
    keypair's quota) then never race each other, only other processes.
    """

    def __init__(
        self,
        store: Store,
        state: Folded,
        changes: Callable[[], C],
        *,
        attempts: int = 5,
        lock: asyncio.Lock | None = None,
    ) -> None:
        self.store = store
        self.state = state
        self._changes = changes
        self.attempts = attempts
        self.lock = lock or asyncio.Lock()

    async def run(
        self,
        decide: Callable[[C], R],
        *,
        what: str,
        undo: Callable[[R], None] = lambda result: None,
    ) -> tuple[R, Stored]:
        """``decide`` on fresh working copies until its decision is stored (or needs no
        write). ``undo`` gives back what a decision took when it could not be stored."""
        for attempt in range(1, self.attempts + 1):
            async with self.lock:
                changes = self._changes()
                result = decide(changes)
                if changes.events == 0:
                    return result, Stored()
                stored = Stored()
                try:
                    for batch in changes.batches:
                        if batch:
                            writes = changes.writes(batch)
                            committed = await self.store.commit(writes)
                            changes.stored(writes, committed)
                            stored.batches.append((writes, committed))
                    return result, stored
                except ConcurrencyConflict as conflict:
                    undo(result)
                    stale = list(conflict.stale)
                    log.info("%s: conflict on %s (attempt %d)", what, conflict, attempt)
                except OutcomeUnknownError as exc:
                    # Perhaps stored, perhaps not: read back what it touched, then decide again
                    # (a stored decision is then seen, and deciding it again changes nothing).
                    undo(result)
                    stale = changes.refs()
                    log.warning("%s: %s (attempt %d); reading back", what, exc, attempt)
                except BaseException:
                    undo(result)
                    raise
            await self.refresh(stale)
        raise TooManyConflictsError(f"{what} kept conflicting ({self.attempts} attempts)")

    async def refresh(self, stale: list[AggregateRef]) -> None:
        """Fold what others stored on ``stale`` aggregates since our guard (their echo from
        the tail is then skipped)."""
        for ref in stale:
            history = await self.store.read(ref, after_seq=self.state.guard(ref))
            for event in history.events:
                self.state.apply(event)
            log.debug("refreshed %s to seq %d", ref, self.state.guard(ref))
