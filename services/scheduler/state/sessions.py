"""Folds ``ev.session.*`` into the scheduler state: tracked sessions, the queues waiting for
admission (per domain) and placement (per resource group), timed sessions, ended ones whose
quota a pass must release, and whose each session's usage is (fed to ``usage`` in the log's
order, with the allocations).
"""

from __future__ import annotations

from commands.session.aggregate import Session
from events.envelope import StoredEvent
from schemas.session import SessionStatus
from services.scheduler.state.model import StateModel, TrackedSession
from services.scheduler.state.usage import Owner


def evolve(state: StateModel, event: StoredEvent) -> None:
    envelope, seq = event.envelope, event.seq
    tracked = state.sessions.get(envelope.aggregate_id)
    ended_before = tracked is not None and tracked.session.status.is_terminal
    if tracked is None:
        session = Session.rehydrate([envelope])
        assert session is not None
        tracked = TrackedSession(session, envelope.tenant, envelope.correlation_id, "", seq)
        state.sessions[session.id] = tracked
        state.usage.requested(seq, session.id, _whose(tracked))
    else:
        tracked.session.evolve([envelope])
    tracked.last_event_id = envelope.event_id
    session = tracked.session
    pending = session.status is SessionStatus.PENDING
    if pending and session.admitted and not tracked.placeable_since:
        tracked.placeable_since = envelope.occurred_at.timestamp()
    if session.status is SessionStatus.RUNNING and session.spec.timeout_s is not None:
        state.timed[session.id] = None
    else:
        state.timed.pop(session.id, None)
    _queue(
        state, state.waiting, session.spec.resource_group, session.id, pending and session.admitted
    )
    if session.owner is not None:
        _queue(
            state,
            state.unadmitted,
            session.owner.domain,
            session.id,
            pending and not session.admitted,
        )
    if session.preempted_by is not None:
        _queue(
            state,
            state.preempting,
            session.preempted_by,
            session.id,
            not session.status.is_terminal,
        )
        if not state.preempting[session.preempted_by]:
            del state.preempting[session.preempted_by]
    if session.status.is_terminal and not ended_before:
        state.usage.ended(seq, session.id)
    if session.status.is_terminal and session.id in state.holdings:
        state.releasable[session.id] = None
        state.ask_for_pass()


def _whose(tracked: TrackedSession) -> Owner:
    """The group and owner a session's usage counts under."""
    return tracked.session.spec.resource_group, tracked.account


def _queue(
    state: StateModel, queues: dict[str, dict[str, None]], key: str, sid: str, inside: bool
) -> None:
    queue = queues.setdefault(key, {})
    if inside:
        if sid not in queue:
            queue[sid] = None
            state.ask_for_pass()
    else:
        queue.pop(sid, None)
