"""Helpers every decision step shares; reads the state and workspace handed in, writes nothing.

The actor the steps write as, the envelope fields of a decision about a tracked session, and
whether a session still waits as a decision sees it.
"""

from __future__ import annotations

from events.envelope import Cause
from schemas.principal import Actor
from schemas.session import SessionStatus
from services.scheduler.state import TrackedSession
from services.scheduler.workspace import Workspace

SCHEDULER = Actor.service("scheduler")


def still_pending(space: Workspace, session_id: str) -> bool:
    session = space.peek_session(session_id)
    return session is not None and session.status is SessionStatus.PENDING


def cause_of(tracked: TrackedSession) -> Cause:
    """The envelope fields of a scheduler decision about a tracked session."""
    return Cause(
        causation_id=tracked.last_event_id,
        correlation_id=tracked.correlation_id,
        actor=SCHEDULER,
        tenant=tracked.tenant,
    )
