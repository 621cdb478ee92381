"""Quota admission inside a decision pass: cancel what a deactivated keypair left waiting,
release what ended, then reserve every scope of each session that fits, in the domains this
replica admits for. The rule itself is pure (``services.scheduler.admission``); this module
turns its decisions into working-copy changes.

Writes (through the pass's workspace) ``ev.session.<id>`` (``SessionAdmitted``,
``SessionPendingReasonChanged``, ``SessionCancelled``) and ``ev.quota.<id>``
(``QuotaScopeOpened``, ``QuotaReserved``, ``QuotaReleased``, ``QuotaSessionDequeued``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from commands.quota import Quota
from events.envelope import Cause
from schemas.principal import Actor
from schemas.session import SessionStatus
from schemas.tenancy import quota_id_for
from services.scheduler.admission import Cancel, Candidate, Decision, Wait, admit, scopes_of
from services.scheduler.state import SchedulerState, TrackedSession
from services.scheduler.workspace import Workspace

SCHEDULER = Actor.service("scheduler")


def still_pending(space: Workspace, session_id: str) -> bool:
    session = space.peek_session(session_id)
    return session is not None and session.status is SessionStatus.PENDING


def _cause(tracked: TrackedSession) -> Cause:
    return Cause(
        causation_id=tracked.last_event_id,
        correlation_id=tracked.correlation_id,
        actor=SCHEDULER,
        tenant=tracked.tenant,
    )


def admit_sessions(
    state: SchedulerState, space: Workspace, now: datetime, may_admit: Callable[[str], bool]
) -> dict[str, list[str]]:
    """Cancel what a deactivated keypair left waiting, release what ended, then admit what
    fits, in the domains this scheduler admits for. Returns the admitted sessions per resource
    group (placement takes them in this same pass)."""
    for session_id in [*_owned_pending(state)]:
        owner = state.sessions[session_id].session.owner
        assert owner is not None
        if may_admit(owner.domain) and not state.keypair_active(owner.access_key):
            _end(state, space, session_id, f"keypair {owner.access_key} was deactivated", now)
    ended = [s.id for s in space.sessions() if s.status.is_terminal]
    for session_id in dict.fromkeys([*ended, *state.releasable]):
        owner = state.sessions[session_id].session.owner
        if owner is None or may_admit(owner.domain):
            _release(state, space, session_id, now)
    admitted: dict[str, list[str]] = {}
    for domain, queue in state.unadmitted.items():
        if not queue or not may_admit(domain):
            continue
        candidates = [_candidate(state, sid) for sid in queue if still_pending(space, sid)]
        held = {}
        for kind, scope_id in scopes_of(candidates):
            quota = space.peek_quota(quota_id_for(kind, scope_id))
            if quota is not None:
                held[quota.id] = quota
        for decision in admit(candidates, held, state.directory):
            _apply(state, space, decision, now, admitted)
    return admitted


def _owned_pending(state: SchedulerState) -> list[str]:
    found = [sid for queue in state.unadmitted.values() for sid in queue]
    for queue in state.waiting.values():
        found += [sid for sid in queue if state.sessions[sid].session.owner is not None]
    return found


def _candidate(state: SchedulerState, session_id: str) -> Candidate:
    session = state.sessions[session_id].session
    assert session.owner is not None
    return Candidate(session_id, session.owner, session.spec.total, session.spec.priority)


def _apply(
    state: SchedulerState,
    space: Workspace,
    decision: Decision,
    now: datetime,
    admitted: dict[str, list[str]],
) -> None:
    tracked = state.sessions[decision.session_id]
    session = space.session(decision.session_id)
    assert session is not None and session.owner is not None
    if isinstance(decision, Cancel):
        _end(state, space, session.id, decision.reason, now)
    elif isinstance(decision, Wait):
        session.note_pending_reason(decision.reason, now)
        space.unit(_cause(tracked), session)
    else:
        session.admit("admitted", now)
        quotas = [space.quota(kind, sid, now) for kind, sid in session.owner.scopes()]
        for quota in quotas:
            quota.reserve(session.id, session.spec.total, now)
        space.unit(_cause(tracked), session, *quotas)
        admitted.setdefault(session.spec.resource_group, []).append(session.id)


def _end(
    state: SchedulerState, space: Workspace, session_id: str, reason: str, now: datetime
) -> None:
    """Cancel a waiting session and give back what it holds, in one decision."""
    session = space.session(session_id)
    assert session is not None
    session.terminate(reason, now)
    space.unit(
        _cause(state.sessions[session_id]), session, *_releases(state, space, session_id, now)
    )


def _release(state: SchedulerState, space: Workspace, session_id: str, now: datetime) -> None:
    quotas = _releases(state, space, session_id, now)
    if quotas:
        space.unit(_cause(state.sessions[session_id]), *quotas)


def _releases(
    state: SchedulerState, space: Workspace, session_id: str, now: datetime
) -> list[Quota]:
    """Every scope holding the session, with its reservation released or queue place given
    back (already done ones change nothing)."""
    session = space.peek_session(session_id)
    reason = f"session {session.status.value}" if session is not None else "session ended"
    quotas = []
    for quota_id in sorted(state.holdings.get(session_id, ())):
        known = state.quotas.get(quota_id)
        if known is None:
            continue
        quota = space.quota(known.scope, known.scope_id, now)
        quota.release(session_id, reason, now)
        quota.dequeue(session_id, reason, now)
        quotas.append(quota)
    return quotas
