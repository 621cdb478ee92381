"""One decision's scratch space: working copies of the aggregates it changes, and the guarded
group commits that store what it decided on ``ev.session.<id>``, ``ev.node.<id>`` and
``ev.quota.<id>``.

The folded state changes only through stored events (``Fold.record_own`` after the ack, or the
tail), never through a decision in progress: a decision that fails to commit leaves no trace.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable
from datetime import datetime
from typing import TypeVar

from commands.aggregate import Aggregate
from commands.node import Node
from commands.quota import Quota
from commands.session import Session
from events.envelope import Cause, Envelope
from events.fold import Fold
from events.store import EventStore
from events.writes import MAX_BATCH_MESSAGES, AggregateRef, Committed, Write
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind, quota_id_for
from services.scheduler.state import SchedulerState

log = logging.getLogger(__name__)

A = TypeVar("A", bound=Aggregate)


def working_copy(aggregate: A) -> A:
    """A copy to decide on. Aggregate values are frozen models; only their containers
    (allocations, history, the library's pending list) change in place, so copying those is
    enough, and far cheaper than a deep copy of a node with many allocations."""
    clone = copy.copy(aggregate)
    for name, value in vars(aggregate).items():
        if isinstance(value, list | dict | set):
            setattr(clone, name, copy.copy(value))
    return clone


class Workspace:
    def __init__(self, state: SchedulerState, *, max_events: int = MAX_BATCH_MESSAGES) -> None:
        self._state = state
        self._max_events = max_events
        self._copies: dict[AggregateRef, Aggregate] = {}
        self._expected: dict[AggregateRef, int] = {}
        self.new_nodes: dict[str, Node] = {}
        self.batches: list[dict[AggregateRef, list[Envelope]]] = [{}]
        self._size = 0

    @property
    def max_events(self) -> int:
        """Events per batch; a unit larger than this gets a batch of its own."""
        return self._max_events

    @property
    def events(self) -> int:
        return sum(len(envs) for batch in self.batches for envs in batch.values())

    # ---- aggregates to decide on ---------------------------------------------------------

    def session(self, session_id: str) -> Session | None:
        tracked = self._state.sessions.get(session_id)
        return self._copy(tracked.session) if tracked is not None else None

    def node(self, node_id: str) -> Node | None:
        if node_id in self.new_nodes:
            return self.new_nodes[node_id]
        known = self._state.nodes.get(node_id)
        return self._copy(known) if known is not None else None

    def peek_node(self, node_id: str) -> Node | None:
        """The node as this decision sees it, without taking a copy (read only)."""
        ref = AggregateRef(AggregateType.NODE, node_id)
        seen = self._copies.get(ref) or self.new_nodes.get(node_id)
        if isinstance(seen, Node):
            return seen
        return self._state.nodes.get(node_id)

    def quota(self, scope: ScopeKind, scope_id: str, now: datetime) -> Quota:
        """The scope's quota aggregate to decide on, opened here if it does not exist yet."""
        quota_id = quota_id_for(scope, scope_id)
        seen = self._copies.get(AggregateRef(AggregateType.QUOTA, quota_id))
        if isinstance(seen, Quota):
            return seen
        known = self._state.quotas.get(quota_id)
        if known is None:
            return self.add(Quota.open(scope, scope_id, now))
        return self._copy(known)

    def peek_quota(self, quota_id: str) -> Quota | None:
        """The scope as this decision sees it, without taking a copy (read only)."""
        seen = self._copies.get(AggregateRef(AggregateType.QUOTA, quota_id))
        if isinstance(seen, Quota):
            return seen
        return self._state.quotas.get(quota_id)

    def peek_session(self, session_id: str) -> Session | None:
        seen = self._copies.get(AggregateRef(AggregateType.SESSION, session_id))
        if isinstance(seen, Session):
            return seen
        tracked = self._state.sessions.get(session_id)
        return tracked.session if tracked is not None else None

    def sessions(self) -> list[Session]:
        """The sessions this decision has changed (or may change)."""
        return [a for a in self._copies.values() if isinstance(a, Session)]

    def add(self, aggregate: A) -> A:
        """A new aggregate: its first write is create-once (expected sequence 0)."""
        self._copies[aggregate.ref] = aggregate
        self._expected[aggregate.ref] = 0
        if isinstance(aggregate, Node):
            self.new_nodes[aggregate.id] = aggregate
        return aggregate

    def _copy(self, aggregate: A) -> A:
        ref = aggregate.ref
        if ref not in self._copies:
            self._copies[ref] = working_copy(aggregate)
            # The guard is the one the copy was taken at, not the state's at commit time:
            # an event folded in between must fail the write, not be overwritten.
            self._expected[ref] = self._state.guard(ref)
        found = self._copies[ref]
        assert isinstance(found, type(aggregate))
        return found

    # ---- decisions to writes -------------------------------------------------------------

    def unit(self, cause: Cause, *aggregates: Aggregate) -> int:
        """Collect what one decision changed on ``aggregates``; returns the event count. A
        unit never spans two batches, so each batch holds whole decisions (a session is never
        scheduled in one batch and allocated in another)."""
        return self.joint([(cause, a) for a in aggregates])

    def joint(self, parts: Iterable[tuple[Cause, Aggregate]]) -> int:
        """Like ``unit``, for decisions that must be stored together although each aggregate
        has its own cause: sessions admitted in a pass and the one reservation per scope that
        names them all."""
        collected = [(a.ref, a.collect(cause)) for cause, a in parts]
        size = sum(len(envelopes) for _, envelopes in collected)
        if size == 0:
            return 0
        if self._size and self._size + size > self._max_events:
            self.batches.append({})
            self._size = 0
        batch = self.batches[-1]
        for ref, envelopes in collected:
            if envelopes:
                batch.setdefault(ref, []).extend(envelopes)
        self._size += size
        return size

    async def commit(
        self, store: EventStore, fold: Fold[SchedulerState], *, quiet: bool
    ) -> list[Committed]:
        """Store the batches one after the other, each an atomic group commit, and apply each
        to the state from its ack. Raises ``ConcurrencyConflict`` from the first stale batch
        (the ones before it are stored and applied)."""
        done: list[Committed] = []
        for batch in self.batches:
            if not batch:
                continue
            writes = [Write(ref, self._expected[ref], tuple(envs)) for ref, envs in batch.items()]
            committed = await store.commit(writes)
            # ``quiet``: a pass already decided with everything its own writes change.
            self._state.quiet = quiet
            try:
                fold.record_own(writes, committed)
            finally:
                self._state.quiet = False
            self._expected.update(committed.last_seqs)
            done.append(committed)
        return done


async def refresh(store: EventStore, state: SchedulerState, stale: list[AggregateRef]) -> None:
    """After a conflict: fold what others stored on ``stale`` aggregates since our guard (their
    echo from the tail is then skipped)."""
    for ref in stale:
        history = await store.read(ref, after_seq=state.guard(ref))
        for event in history.events:
            state.apply(event)
        log.info("refreshed %s to seq %d after a conflict", ref, state.guard(ref))


def merged(commits: list[Committed]) -> Committed:
    """Several commits reported as one (what an outcome lists)."""
    seqs = tuple(seq for c in commits for seq in c.seqs)
    last: dict[AggregateRef, int] = {}
    for c in commits:
        last.update(c.last_seqs)
    return Committed(seqs=seqs, last_seqs=last, recovered=any(c.recovered for c in commits))
