"""Admission step of a decision pass; writes ``ev.session.<id>`` and ``ev.quota.<id>``.

Cancel what a deactivated keypair left waiting, release what ended and was not released with
its end (``Workspace`` releases in the unit that ends a session), then decide which waiting
sessions fit every scope, in the domains this replica admits for. The rule itself is pure
(``rules.admission``). What fits is admitted by the writes of placement
(``steps.place_writes``: with the session's ``SessionScheduled``, or with a
``SessionAdmitted`` when it is not placed), one reservation per scope per unit, naming every
session it concerns, not one per session and scope.

Writes (through the pass's workspace) ``ev.session.<id>`` (``SessionPendingReasonChanged``,
``SessionCancelled``) and ``ev.quota.<id>`` (``QuotaReleased``, ``QuotaSessionDequeued``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from schemas.session import SessionStatus
from schemas.tenancy import ScopeKind, quota_id_for
from services.scheduler.rules.admission import Cancel, Candidate, Wait, admit, scopes_of
from services.scheduler.state import SchedulerState
from services.scheduler.steps.common import cause_of, still_pending
from services.scheduler.workspace import Workspace

REASON_REFRESH_S = 30.0
_NUMBERS = re.compile(r"\d+(\.\d+)?")


def admit_sessions(
    state: SchedulerState,
    space: Workspace,
    now: datetime,
    may_admit: Callable[[str], bool],
    held_back: Collection[str] = frozenset(),
) -> dict[str, list[str]]:
    """Cancel what a deactivated keypair left waiting, release what ended, then decide what
    fits, in the domains this scheduler admits for, leaving out ``held_back`` (waiting for a
    dependency or a start time: they hold no quota until they could run). Returns the
    sessions that fit, per resource group, in admission order, *not yet admitted*: placement
    takes them in this same pass, and whatever admits them (``place_writes.write_admissions``,
    or their placement) stores their reservations with it."""
    for session_id in _of_deactivated_keypairs(state):
        owner = state.sessions[session_id].session.owner
        assert owner is not None
        if may_admit(owner.domain):
            _end(state, space, session_id, f"keypair {owner.access_key} was deactivated", now)
    ended = [s.id for s in space.sessions() if s.status.is_terminal]
    releasable = []
    for session_id in dict.fromkeys([*ended, *state.releasable]):
        owner = state.sessions[session_id].session.owner
        if owner is None or may_admit(owner.domain):
            releasable.append(session_id)
    _release(state, space, releasable, now)
    admitted: dict[str, list[str]] = {}
    for domain, queue in state.unadmitted.items():
        if not queue or not may_admit(domain):
            continue
        candidates = [
            _candidate(state, sid)
            for sid in queue
            if sid not in held_back and still_pending(space, sid)
        ]
        held = {}
        for kind, scope_id in scopes_of(candidates):
            quota = space.peek_quota(quota_id_for(kind, scope_id))
            if quota is not None:
                held[quota.id] = quota
        for decision in admit(candidates, held, state.directory):
            if isinstance(decision, Cancel):
                _end(state, space, decision.session_id, decision.reason, now)
            elif isinstance(decision, Wait):
                _note_wait(state, space, decision, now)
            else:
                session = state.sessions[decision.session_id].session
                admitted.setdefault(session.spec.resource_group, []).append(session.id)
    return admitted


def _note_wait(state: SchedulerState, space: Workspace, wait: Wait, now: datetime) -> None:
    """Say why a session waits. A reason that only moved in its numbers (the scope's use
    changes with every admission and release) is rewritten at most every
    ``REASON_REFRESH_S``: a thousand waiting sessions must not each get an event per pass."""
    seen = space.peek_session(wait.session_id)
    assert seen is not None
    if seen.reason == wait.reason:
        return
    last = seen.history[-1]
    fresh = now - last.at < timedelta(seconds=REASON_REFRESH_S)
    if fresh and _shape(last.reason) == _shape(wait.reason):
        return
    session = space.session(wait.session_id)
    assert session is not None
    session.note_pending_reason(wait.reason, now)
    space.unit(cause_of(state.sessions[session.id]), session)


def _shape(reason: str) -> str:
    return _NUMBERS.sub("#", reason)


def _of_deactivated_keypairs(state: SchedulerState) -> list[str]:
    """The waiting sessions of deactivated keypairs, found through each keypair's quota scope
    (it queues or reserves every session the keypair created and has not given back): a pass
    looks at a handful of keypairs, not at every waiting session."""
    found: list[str] = []
    for access_key, keypair in state.directory.keypairs.items():
        if keypair.active:
            continue
        quota = state.quotas.get(quota_id_for(ScopeKind.KEYPAIR, access_key))
        for session_id in [*quota.queued, *quota.reserved] if quota is not None else []:
            tracked = state.sessions.get(session_id)
            if tracked is not None and tracked.session.status is SessionStatus.PENDING:
                found.append(session_id)
    return found


def _candidate(state: SchedulerState, session_id: str) -> Candidate:
    tracked = state.sessions[session_id]
    session = tracked.session
    assert session.owner is not None
    return Candidate(
        session_id, session.owner, session.spec.total, session.spec.priority, tracked.order
    )


def _end(
    state: SchedulerState, space: Workspace, session_id: str, reason: str, now: datetime
) -> None:
    """Cancel a waiting session; the workspace gives back what it holds in the same unit."""
    session = space.session(session_id)
    assert session is not None
    session.terminate(reason, now)
    space.unit(cause_of(state.sessions[session_id]), session)


end_waiting = _end
"""Cancel a waiting session with a reason and give back what it holds (one decision)."""


def _release(
    state: SchedulerState, space: Workspace, session_ids: list[str], now: datetime
) -> None:
    """Sessions ended without their release in the same unit (in a log written by an older
    version, which released in a later pass, or while a scope was quarantined): every scope
    still holding them gives them back, one event per scope. Releasing is idempotent, so a
    scope left out is released by the next pass (the session stays releasable until every
    scope let it go)."""
    reasons = {sid: _ended_reason(space, sid) for sid in session_ids}
    by_quota: dict[str, dict[str, str]] = {}
    for session_id, reason in reasons.items():
        for quota_id in state.holdings.get(session_id, ()):
            by_quota.setdefault(quota_id, {})[session_id] = reason
    for quota_id in sorted(by_quota):
        known = state.quotas.get(quota_id)
        if known is None:
            continue
        held = by_quota[quota_id]
        quota = space.quota(known.scope, known.scope_id, now)
        quota.release(held, now)
        quota.dequeue(held, now)
        space.unit(cause_of(state.sessions[next(iter(held))]), quota)


def _ended_reason(space: Workspace, session_id: str) -> str:
    session = space.peek_session(session_id)
    return f"session {session.status.value}" if session is not None else "session ended"
