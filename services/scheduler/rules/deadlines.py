"""Time limits, pure (reads and writes no subjects; ``now`` is passed in): when a running
session has lived as long as its keypair's policy allows (``max_session_lifetime_s``, counted
from when it started running), when a running interactive session has gone unused as long as
that policy allows (``idle_timeout_s``, counted from its start or its latest app or terminal
traffic or output, whichever is later; with ``idle_utilization_threshold_pct`` also from its
start or the latest time its CPU or GPU use reached that threshold), and when a waiting one has
waited as long as its resource group allows (``pending_timeout_s``, counted from its request).
``steps.lifecycle`` ends them.

Every deadline derives from the session's history, its activity reports and the directory as
folded, so a restarted scheduler finds them again from the log: nothing is polled, nothing is
stored as a timer. A policy or group changed later applies to sessions already running or
waiting. Where several limits apply, the earliest is the deadline.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from commands.directory import Directory
from commands.session.aggregate import Session
from schemas.activity import TRAFFIC, UTILISATION, ActivitySource
from schemas.session import SessionStatus, SessionType
from schemas.tenancy import KeypairPolicyLimits


@dataclass(frozen=True, slots=True)
class Deadline:
    session_id: str
    at: datetime
    reason: str


@dataclass(frozen=True, slots=True)
class LastActivity:
    """When a session was last reported in use (None: never), as folded from its reports."""

    traffic: datetime | None = None
    """App or terminal traffic, or output: the latest of them."""
    busy: datetime | None = None
    """CPU or GPU use at or over the owner's policy's threshold (any reported use, while the
    policy sets none): the latest."""

    def seen(
        self,
        source: ActivitySource,
        at: datetime,
        utilization_pct: float | None = None,
        threshold_pct: int | None = None,
    ) -> LastActivity:
        """This, after a report of ``source`` at ``at`` (reports may arrive out of order);
        ``threshold_pct``: the owner's policy's when the report was folded."""
        if source in TRAFFIC and (self.traffic is None or at > self.traffic):
            return replace(self, traffic=at)
        if (
            source in UTILISATION
            and (threshold_pct is None or (utilization_pct or 0.0) >= threshold_pct)
            and (self.busy is None or at > self.busy)
        ):
            return replace(self, busy=at)
        return self


NEVER = LastActivity()


def any_time_limits(directory: Directory) -> bool:
    """Whether any policy or group sets one (if none does, nothing needs looking at)."""
    return any(
        p.keypair is not None
        and (p.keypair.max_session_lifetime_s is not None or p.keypair.idle_timeout_s is not None)
        for p in directory.policies.values()
    ) or any(g.scheduling.pending_timeout_s is not None for g in directory.groups.values())


def deadline_of(
    session: Session, directory: Directory, activity: LastActivity = NEVER
) -> Deadline | None:
    """The earliest time limit that applies to the session now, or None."""
    if session.status is SessionStatus.RUNNING and session.owner is not None:
        limits = directory.keypair_limits(session.owner.access_key)
        started = session.started_at
        if limits is None or started is None:
            return None
        policy = f"keypair {session.owner.access_key}'s policy"
        found = [
            Deadline(session.id, since + timedelta(seconds=seconds), reason)
            for since, seconds, reason in _running(session, policy, limits, started, activity)
        ]
        return min(found, key=lambda d: d.at, default=None)
    if session.status is SessionStatus.PENDING and session.history:
        group = directory.groups.get(session.spec.resource_group)
        if group is None or group.scheduling.pending_timeout_s is None:
            return None
        timeout = group.scheduling.pending_timeout_s
        reason = f"waited longer than resource group {group.name}'s pending timeout ({timeout}s)"
        return Deadline(session.id, session.history[0].at + timedelta(seconds=timeout), reason)
    return None


def _running(
    session: Session,
    policy: str,
    limits: KeypairPolicyLimits,
    started: datetime,
    activity: LastActivity,
) -> Iterator[tuple[datetime, int, str]]:
    """Each limit ``policy`` sets on a running session: (counted from, seconds, reason)."""
    lifetime = limits.max_session_lifetime_s
    if lifetime is not None:
        reason = f"reached its lifetime limit: {policy} allows {lifetime}s of running"
        yield started, lifetime, reason
    # The idle rules: interactive sessions only (a batch job ends by itself, and its own
    # timeout bounds it).
    timeout = limits.idle_timeout_s
    if timeout is None or session.spec.type is not SessionType.INTERACTIVE:
        return
    idle = f"for {timeout}s ({policy} idle timeout)"
    last_used = max(started, activity.traffic or started)
    yield last_used, timeout, f"idle: no app or terminal traffic and no output {idle}"
    threshold = limits.idle_utilization_threshold_pct
    if threshold is not None:
        under = f"CPU under {threshold}%"
        if any(k.resources.gpu_hundredths for k in session.spec.kernels):
            under += f" and GPU under {threshold}%"
        yield max(started, activity.busy or started), timeout, f"idle: {under} {idle}"


def deadlines(
    sessions: Iterable[tuple[Session, LastActivity]], directory: Directory, now: datetime
) -> tuple[list[Deadline], datetime | None]:
    """The deadlines that have come, and the earliest one still ahead (the next timer)."""
    due: list[Deadline] = []
    upcoming: datetime | None = None
    for session, activity in sessions:
        deadline = deadline_of(session, directory, activity)
        if deadline is None:
            continue
        if deadline.at <= now:
            due.append(deadline)
        elif upcoming is None or deadline.at < upcoming:
            upcoming = deadline.at
    return due, upcoming
