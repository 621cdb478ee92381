"""Events of the ``activity`` aggregate (``ev.activity.<reporter id>``): one reporter's reports
that sessions were in use, which the scheduler's idle timeout reads. Each such aggregate is
written only by its reporter: a node's agent (under its node id: output, CPU and GPU
utilisation) or an app proxy replica (under its proxy id: app and terminal traffic).
"""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from events.catalogue import Event, Payload, event, upcaster
from schemas.activity import ActivitySource
from schemas.subjects import AggregateType

ACTIVITY = AggregateType.ACTIVITY

REPORTS_PER_EVENT = 400
"""Reports a reporter puts in one event at most (~70 KB of JSON, well under an event's
256 KiB). Not a rule for readers: an event's size is bounded by the store."""


class ActivityReport(BaseModel):
    """A running session was in use: the last time ``source`` saw it so within the reporter's
    interval."""

    model_config = ConfigDict(frozen=True, extra="ignore")

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


@event("SessionActivityReported", ACTIVITY, version=2)
class SessionActivityReported(Event):
    """What one of the reporter's flushes saw in use: at most one report per session, kernel
    and source per interval, and only when there was something to report (an idle cluster
    writes none); none about a session the reporter knows has ended, and a reader ignores one
    about a session that is not running (a report races the session's end). A flush of more
    than ``REPORTS_PER_EVENT`` reports writes several (two per atomic write).

    v1 carried one report (its fields at the top level): a node running 300 kernels wrote 300
    events a minute; v2 writes one."""

    reports: tuple[ActivityReport, ...] = Field(min_length=1)


@upcaster("SessionActivityReported", from_version=1)
def _one_report_to_a_list(payload: Payload) -> Payload:
    return {"reports": [payload]}
