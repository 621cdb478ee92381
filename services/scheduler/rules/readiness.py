"""Readiness rule, pure (reads and writes no subjects): may a waiting session run yet?

Looks at its dependencies and its start time (no I/O, no clock: ``now`` is passed in);
``steps.lifecycle`` acts on the verdict.

A dependency succeeded when it is TERMINATED with exit code 0. Until every dependency has, the
session is ``Blocked``; once one can no longer succeed, the session is ``Doomed`` and the
scheduler cancels it. A session with a start time in the future is ``Blocked`` until then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from commands.session.aggregate import Session
from schemas.session import SessionStatus


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the readiness of a dependent needs to know of a session."""

    status: SessionStatus
    exit_code: int | None = None


Lookup = Callable[[str], Outcome | None]
"""Session id -> its status and exit code, or None when no such session is known."""


@dataclass(frozen=True, slots=True)
class Ready:
    """Nothing holds it back: place it."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """Not yet. ``wake_at``: when to look again (None: when a dependency changes)."""

    reason: str
    wake_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Doomed:
    """It can never run: cancel it with this reason."""

    reason: str


Readiness = Ready | Blocked | Doomed


def readiness(session: Session, lookup: Lookup, now: datetime) -> Readiness:
    """Doomed by any dependency first (there is no point waiting for the others or the start
    time), then blocked by the first dependency not yet succeeded, then by the start time."""
    spec = session.spec
    waiting: str | None = None
    for dependency in spec.depends_on:
        outcome = lookup(dependency)
        doom = _doom(session.id, dependency, outcome)
        if doom is not None:
            return Doomed(doom)
        if waiting is None and not _succeeded(outcome):
            waiting = dependency
    if waiting is not None:
        return Blocked(f"waiting for session {waiting[:8]} to succeed")
    if spec.starts_at is not None and now < spec.starts_at:
        return Blocked(f"starts at {spec.starts_at.isoformat()}", wake_at=spec.starts_at)
    return Ready()


def _succeeded(outcome: Outcome | None) -> bool:
    return (
        outcome is not None
        and outcome.status is SessionStatus.TERMINATED
        and outcome.exit_code == 0
    )


def _doom(session_id: str, dependency: str, outcome: Outcome | None) -> str | None:
    """Why ``dependency`` can never succeed, or None while it still may (or has)."""
    short = dependency[:8]
    if dependency == session_id:
        return "a session cannot depend on itself"
    if outcome is None:
        return f"dependency {dependency} is not a known session"
    match outcome.status:
        case SessionStatus.ERROR:
            return f"dependency {short} ended ERROR"
        case SessionStatus.CANCELLED:
            return f"dependency {short} was cancelled"
        case SessionStatus.TERMINATED if outcome.exit_code is None:
            return f"dependency {short} ended without an exit code"
        case SessionStatus.TERMINATED if outcome.exit_code != 0:
            return f"dependency {short} failed with exit code {outcome.exit_code}"
    return None


def next_timeout(sessions: Iterable[Session]) -> datetime | None:
    """The earliest ``timeout_at`` among RUNNING sessions, for the scheduler's timer (one in
    the past is due now). None when no running session has a timeout."""
    due = [
        s.timeout_at
        for s in sessions
        if s.status is SessionStatus.RUNNING and s.timeout_at is not None
    ]
    return min(due, default=None)


def timed_out(sessions: Iterable[Session], now: datetime) -> list[Session]:
    """RUNNING sessions whose ``timeout_at`` has come: call ``time_out(now)`` on each."""
    return [
        s
        for s in sessions
        if s.status is SessionStatus.RUNNING and s.timeout_at is not None and s.timeout_at <= now
    ]
