"""A decision's scratch space in the scheduler: the unit of work's ``Changes`` with accessors
for the aggregates the scheduler writes, ``ev.session.<id>``, ``ev.node.<id>`` and
``ev.quota.<id>``, each a working copy taken at its guard (``commands.unit_of_work``).

Every unit that ends a session also gives back what its quota scopes hold for it
(``QuotaReleased``, ``QuotaSessionDequeued``), stored in the same atomic write and ahead of
the session's end: no reader ever sees a session ended while its quota is still held.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TypeVar

from commands.aggregate import Aggregate
from commands.node.aggregate import Node
from commands.quota import Quota
from commands.session.aggregate import Session
from commands.unit_of_work import Changes
from events.envelope import Cause
from events.writes import MAX_BATCH_MESSAGES, AggregateRef, Committed, Write
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind, quota_id_for
from services.scheduler.state import SchedulerState

A = TypeVar("A", bound=Aggregate)


class Workspace(Changes):
    def __init__(
        self, state: SchedulerState, *, max_events: int = MAX_BATCH_MESSAGES, quiet: bool = False
    ) -> None:
        super().__init__(state, max_events=max_events)
        self._state = state
        self._quiet = quiet
        """A pass already decided with everything its own writes change: folding them from
        the ack must not ask for another pass."""
        self.new_nodes: dict[str, Node] = {}

    # ---- aggregates to decide on ---------------------------------------------------------

    def session(self, session_id: str) -> Session | None:
        tracked = self._state.sessions.get(session_id)
        return self.track(tracked.session) if tracked is not None else None

    def node(self, node_id: str) -> Node | None:
        if node_id in self.new_nodes:
            return self.new_nodes[node_id]
        known = self._state.nodes.get(node_id)
        return self.track(known) if known is not None else None

    def peek_node(self, node_id: str) -> Node | None:
        """The node as this decision sees it, without taking a copy (read only)."""
        seen = self.seen(AggregateRef(AggregateType.NODE, node_id)) or self.new_nodes.get(node_id)
        if isinstance(seen, Node):
            return seen
        return self._state.nodes.get(node_id)

    def quota(self, scope: ScopeKind, scope_id: str, now: datetime) -> Quota:
        """The scope's quota aggregate to decide on, opened here if it does not exist yet."""
        quota_id = quota_id_for(scope, scope_id)
        seen = self.seen(AggregateRef(AggregateType.QUOTA, quota_id))
        if isinstance(seen, Quota):
            return seen
        known = self._state.quotas.get(quota_id)
        if known is None:
            return self.add(Quota.open(scope, scope_id, now))
        return self.track(known)

    def peek_quota(self, quota_id: str) -> Quota | None:
        """The scope as this decision sees it, without taking a copy (read only)."""
        seen = self.seen(AggregateRef(AggregateType.QUOTA, quota_id))
        if isinstance(seen, Quota):
            return seen
        return self._state.quotas.get(quota_id)

    def peek_session(self, session_id: str) -> Session | None:
        seen = self.seen(AggregateRef(AggregateType.SESSION, session_id))
        if isinstance(seen, Session):
            return seen
        tracked = self._state.sessions.get(session_id)
        return tracked.session if tracked is not None else None

    def sessions(self) -> list[Session]:
        """The sessions this decision has changed (or may change)."""
        return [a for a in self.copies.values() if isinstance(a, Session)]

    def joint(self, parts: Iterable[tuple[Cause, Aggregate]]) -> int:
        parts = list(parts)
        return super().joint([*self._releases(parts), *parts])

    def joint_runs(self, parts: list[tuple[Cause, Aggregate]]) -> None:
        """Many decisions' parts (a pass's kernel facts), stored as few joint units as fit a
        batch, each with its releases: a run's ended sessions give back their quota in one
        event per scope. An aggregate in two runs is stored whole with the first (its events
        are collected at once), which changes no decision."""
        run: list[tuple[Cause, Aggregate]] = []
        size, scopes = 0, set[str]()
        for cause, aggregate in parts:
            held: set[str] = set()
            if isinstance(aggregate, Session) and aggregate.status.is_terminal:
                held = self._state.holdings.get(aggregate.id, set())
            weight = len(aggregate.pending_events) + len(held - scopes)
            if run and size + weight > self.max_events:
                self.joint(run)
                run, size, scopes = [], 0, set()
                weight = len(aggregate.pending_events) + len(held)
            run.append((cause, aggregate))
            size += weight
            scopes |= held
        if run:
            self.joint(run)

    def _releases(self, parts: list[tuple[Cause, Aggregate]]) -> list[tuple[Cause, Quota]]:
        """The quota scopes still holding a session these parts end, each giving back all of
        them in one event, caused as the first session's end: the end and the release are
        one decision (units are never split between batches)."""
        reasons: dict[str, dict[str, str]] = {}
        causes: dict[str, tuple[Cause, datetime]] = {}
        for cause, aggregate in parts:
            if not isinstance(aggregate, Session) or not aggregate.status.is_terminal:
                continue
            ended = aggregate.history[-1]
            for quota_id in sorted(self._state.holdings.get(aggregate.id, ())):
                reasons.setdefault(quota_id, {})[aggregate.id] = f"session {ended.status.value}"
                causes.setdefault(quota_id, (cause, ended.at))
        released: list[tuple[Cause, Quota]] = []
        for quota_id, held in sorted(reasons.items()):
            known = self._state.quotas.get(quota_id)
            if known is None or self._state.is_broken(known.ref):
                continue  # a pass releases it later (the session stays releasable)
            cause, at = causes[quota_id]
            quota = self.quota(known.scope, known.scope_id, at)
            quota.release(held, at)
            quota.dequeue(held, at)
            released.append((cause, quota))
        return released

    def add(self, aggregate: A) -> A:
        """A new aggregate: its first write is create-once (expected sequence 0)."""
        if isinstance(aggregate, Node):
            self.new_nodes[aggregate.id] = aggregate
        return super().add(aggregate)

    def stored(self, writes: list[Write], committed: Committed) -> None:
        self._state.quiet = self._quiet
        try:
            super().stored(writes, committed)
        finally:
            self._state.quiet = False
