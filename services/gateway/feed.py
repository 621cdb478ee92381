"""Live feed of one session's status changes, read through a JetStream consumer on
``ev.session.<id>`` from its first event: in order, no gap, no duplicate."""

from __future__ import annotations

from collections.abc import AsyncIterator

from events.bus import Bus
from events.tail import Tail
from schemas.session import TERMINAL_STATUSES, SessionStatus
from schemas.subjects import event_subject
from services.gateway.views import StatusChangeRow

STATUS_OF = {
    "SessionRequested": SessionStatus.PENDING,
    "SessionPendingReasonChanged": SessionStatus.PENDING,
    "SessionScheduled": SessionStatus.SCHEDULED,
    "SessionPreparing": SessionStatus.PREPARING,
    "SessionCreating": SessionStatus.CREATING,
    "SessionStarted": SessionStatus.RUNNING,
    "SessionTerminating": SessionStatus.TERMINATING,
    "SessionTerminated": SessionStatus.TERMINATED,
    "SessionCancelled": SessionStatus.CANCELLED,
    "SessionFailed": SessionStatus.ERROR,
}


async def session_status_changes(
    bus: Bus, session_id: str, *, poll_s: float = 1.0
) -> AsyncIterator[StatusChangeRow]:
    # A session has a handful of events, so reading its subject from the first one is cheap
    # and needs no hand-off between a view row and the stream: nothing can fall in between.
    tail = Tail(bus, subjects=[event_subject("session", session_id)], batch=64)
    try:
        while True:
            for event in await tail.fetch(timeout=poll_s):
                status = STATUS_OF.get(event.name)
                if status is None:
                    continue
                yield StatusChangeRow(
                    seq=event.seq,
                    status=status.value,
                    reason=str(event.envelope.payload.get("reason", "")),
                    at=event.envelope.occurred_at,
                )
                if status in TERMINAL_STATUSES:
                    return
    finally:
        await tail.close()
