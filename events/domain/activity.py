"""Events of the ``activity`` aggregate (``ev.activity.<reporter id>``): one reporter's reports
that sessions were in use, which the scheduler's idle timeout reads. Each such aggregate is
written only by its reporter: a node's agent (under its node id: output, CPU and GPU
utilisation) or an app proxy replica (under its proxy id: app and terminal traffic).
"""

from __future__ import annotations

from pydantic import AwareDatetime

from events.catalogue import Event, event
from schemas.activity import ActivitySource
from schemas.subjects import AggregateType

ACTIVITY = AggregateType.ACTIVITY


@event("SessionActivityReported", ACTIVITY)
class SessionActivityReported(Event):
    """A running session was in use: the last time ``source`` saw it so within the reporter's
    interval. A reporter writes at most one per session, kernel and source per interval, and
    only when there was something to report (an idle cluster writes none); it does not write
    one for a session it knows has ended, and a reader ignores one about a session that is not
    running (a report races the session's end)."""

    session_id: str
    kernel_id: str | None = None
    """The kernel that was in use, when the reporter knows it (output, utilisation); None for
    traffic to the session's apps."""
    source: ActivitySource
    at: AwareDatetime
    """When the activity last happened (the reporter's clock), not when it was written."""
    utilization_pct: float | None = None
    """``cpu`` and ``gpu`` only: the highest utilisation sampled in the interval, in percent
    (of the CPUs the kernel was allocated; of its busiest GPU). Never under ``BUSY_FLOOR_PCT``."""
