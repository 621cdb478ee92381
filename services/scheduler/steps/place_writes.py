"""Placement's writes; ``ev.session.<id>``, ``ev.node.<id>`` and ``ev.quota.<id>``.

The sessions one group's pass placed go to the workspace in joint units that fit a batch:
each session's ``SessionScheduled`` with its allocations (``ResourcesAllocated`` on each node,
caused as the session's own decision), and for the sessions this very pass admitted, their
reservations: one ``QuotaReserved`` per scope per unit, naming them all. A session admitted
and placed in one pass has no ``SessionAdmitted``: its ``SessionScheduled``, stored with its
reservations, admits it (one event fewer per session on the busy path). A unit is stored
whole or not at all, so no session is placed without its reservations, nor reserved without
being admitted.

A node's allocations are collected right after each session's, so two units never share a
node's pending events (a unit split between two batches would otherwise carry another
unit's allocation). What a pass admits and does not place goes through the same units
(``write_admissions``), without allocations.
"""

from __future__ import annotations

from datetime import datetime

from commands.node.aggregate import Node
from commands.session.aggregate import Session
from events.envelope import Cause, Envelope
from events.writes import AggregateRef
from schemas.resources import ResourceSlots
from schemas.tenancy import ScopeKind, quota_id_for
from services.scheduler.state import SchedulerState
from services.scheduler.steps.common import cause_of
from services.scheduler.workspace import Workspace

Scope = tuple[ScopeKind, str]


class PlacementRun:
    """One group's placements and admissions of a pass (or a pass's admissions alone),
    flushed in units of at most a batch's events."""

    def __init__(self, state: SchedulerState, space: Workspace, now: datetime) -> None:
        self._state = state
        self._space = space
        self._now = now
        self._collected: list[tuple[AggregateRef, list[Envelope]]] = []
        self._size = 0
        self._reserve: dict[Scope, dict[str, ResourceSlots]] = {}
        self._reserve_cause: Cause | None = None

    def make_room(self, session: Session, *, kernels: int, fresh: bool) -> None:
        """Flush first if ``session``'s events (one of its own, one per kernel it is placed
        with, and as a fresh one its new reservations) would not fit the unit."""
        weight = 1 + kernels + (self._new_reservations(session) if fresh else 0)
        if self._size and self._size + weight > self._space.max_events:
            self.flush()

    def add(self, session: Session, nodes: list[Node], *, fresh: bool) -> None:
        """``session``'s decided events, and its allocations on ``nodes``; with ``fresh``, its
        reservation on every scope (it was admitted by this pass)."""
        cause = cause_of(self._state.sessions[session.id])
        parts = [(session.ref, session.collect(cause))]
        parts += [(node.ref, node.collect(cause)) for node in nodes]
        self._collected += parts
        self._size += sum(len(envelopes) for _, envelopes in parts)
        if fresh and session.owner is not None:
            self._size += self._new_reservations(session)
            need = session.spec.total
            for scope in session.owner.scopes():
                self._reserve.setdefault(scope, {})[session.id] = need
            self._reserve_cause = self._reserve_cause or cause

    def _new_reservations(self, session: Session) -> int:
        """The events its scopes add to the unit: a reservation on each scope the unit does
        not reserve on yet, and an opening for a scope that does not exist yet."""
        if session.owner is None:
            return 0
        return sum(
            2 if self._space.peek_quota(quota_id_for(*scope)) is None else 1
            for scope in session.owner.scopes()
            if scope not in self._reserve
        )

    def flush(self) -> None:
        """Store what was added as one unit. A scope's reservation names the first fresh
        session of the unit as its cause."""
        for (kind, scope_id), sessions in self._reserve.items():
            quota = self._space.quota(kind, scope_id, self._now)
            quota.reserve(sessions, self._now)
            assert self._reserve_cause is not None
            self._collected.append((quota.ref, quota.collect(self._reserve_cause)))
        if self._collected:
            self._space.joint_collected(self._collected)
        self._collected, self._size, self._reserve, self._reserve_cause = [], 0, {}, None


def write_admissions(
    state: SchedulerState, space: Workspace, session_ids: list[str], now: datetime
) -> None:
    """Admit ``session_ids`` on their own (decided by ``steps.admit.admit_sessions``):
    ``SessionAdmitted`` and their reservations, in units that fit a batch. For the sessions a
    pass admits and does not place; those it places are admitted by their
    ``SessionScheduled`` (``place_group``)."""
    run = PlacementRun(state, space, now)
    for session_id in session_ids:
        session = space.session(session_id)
        assert session is not None
        run.make_room(session, kernels=0, fresh=True)
        session.admit("admitted", now)
        run.add(session, [], fresh=True)
    run.flush()
