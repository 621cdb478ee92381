"""Time limits, pure (reads and writes no subjects; ``now`` is passed in): when a running
session has lived as long as its keypair's policy allows (``max_session_lifetime_s``, counted
from when it started running), and when a waiting one has waited as long as its resource
group allows (``pending_timeout_s``, counted from its request). ``steps.lifecycle`` ends them.

Both deadlines derive from the session's history and the directory as folded, so a restarted
scheduler finds them again from the log: nothing is polled, nothing is stored as a timer. A
policy or group changed later applies to sessions already running or waiting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from commands.directory import Directory
from commands.session import Session
from schemas.session import SessionStatus


@dataclass(frozen=True, slots=True)
class Deadline:
    session_id: str
    at: datetime
    reason: str


def any_time_limits(directory: Directory) -> bool:
    """Whether any policy or group sets one (if none does, nothing needs looking at)."""
    return any(
        p.keypair is not None and p.keypair.max_session_lifetime_s is not None
        for p in directory.policies.values()
    ) or any(g.scheduling.pending_timeout_s is not None for g in directory.groups.values())


def deadline_of(session: Session, directory: Directory) -> Deadline | None:
    """The one time limit that applies to the session now, or None."""
    if session.status is SessionStatus.RUNNING and session.owner is not None:
        limits = directory.keypair_limits(session.owner.access_key)
        started = session.started_at
        if limits is None or limits.max_session_lifetime_s is None or started is None:
            return None
        lifetime = limits.max_session_lifetime_s
        reason = (
            f"reached its lifetime limit: keypair {session.owner.access_key}'s policy allows "
            f"{lifetime}s of running"
        )
        return Deadline(session.id, started + timedelta(seconds=lifetime), reason)
    if session.status is SessionStatus.PENDING and session.history:
        group = directory.groups.get(session.spec.resource_group)
        if group is None or group.scheduling.pending_timeout_s is None:
            return None
        timeout = group.scheduling.pending_timeout_s
        reason = f"waited longer than resource group {group.name}'s pending timeout ({timeout}s)"
        return Deadline(session.id, session.history[0].at + timedelta(seconds=timeout), reason)
    return None


def deadlines(sessions: Iterable[Session], directory: Directory, now: datetime) -> tuple[
    list[Deadline], datetime | None
]:  # fmt: skip
    """The deadlines that have come, and the earliest one still ahead (the next timer)."""
    due: list[Deadline] = []
    upcoming: datetime | None = None
    for session in sessions:
        deadline = deadline_of(session, directory)
        if deadline is None:
            continue
        if deadline.at <= now:
            due.append(deadline)
        elif upcoming is None or deadline.at < upcoming:
            upcoming = deadline.at
    return due, upcoming
