"""Live feed of one session's status changes, read through a JetStream consumer on
``ev.session.<id>`` from its first event: in order, no gap, no duplicate; while it is PENDING,
with its queue position from the queue board (``jy-queues``), pushed again when it moves."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

from events.bus import Bus
from events.queues import QueueBoard
from events.tail import Tail
from projections.sessions.tables import StatusEntry
from schemas.session import TERMINAL_STATUSES, SessionStatus
from schemas.subjects import event_subject

PENDING = SessionStatus.PENDING
STATUS_OF = {
    "SessionRequested": SessionStatus.PENDING,
    "SessionPendingReasonChanged": SessionStatus.PENDING,
    "SessionScheduled": SessionStatus.SCHEDULED,
    "SessionPulling": SessionStatus.PULLING,
    "SessionPreparing": SessionStatus.PREPARING,
    "SessionCreating": SessionStatus.CREATING,
    "SessionStarted": SessionStatus.RUNNING,
    "SessionTerminating": SessionStatus.TERMINATING,
    "SessionTerminated": SessionStatus.TERMINATED,
    "SessionRequeued": SessionStatus.PENDING,
    "SessionCancelled": SessionStatus.CANCELLED,
    "SessionFailed": SessionStatus.ERROR,
}


async def session_status_changes(
    bus: Bus, session_id: str, *, poll_s: float = 1.0
) -> AsyncGenerator[StatusEntry, None]:
    # A session has a handful of events, so reading its subject from the first one is cheap
    # and needs no hand-off between a view row and the stream: nothing can fall in between.
    tail = Tail(bus, subjects=[event_subject("session", session_id)], batch=64)
    try:
        while True:
            for event in await tail.fetch_readable(timeout=poll_s):
                status = STATUS_OF.get(event.name)
                if status is None:
                    continue
                yield StatusEntry(
                    session_id=session_id,
                    seq=event.seq,
                    status=status,
                    reason=str(event.envelope.payload.get("reason", "")),
                    at=event.envelope.occurred_at,
                )
                if status in TERMINAL_STATUSES:
                    return
    finally:
        await tail.close()


@dataclass(frozen=True, slots=True)
class SessionUpdate:
    change: StatusEntry
    """The session's latest status change; a queue move repeats it."""
    queue: tuple[int, int] | None
    """(1-based position, queue length) while PENDING and on the board."""


async def session_updates(
    bus: Bus, board: QueueBoard, session_id: str, *, poll_s: float = 1.0
) -> AsyncIterator[SessionUpdate]:
    """Every status change, each with the queue position at that moment; between them, while
    the session is PENDING, one update each time its position changes."""
    changes = session_status_changes(bus, session_id, poll_s=poll_s)
    # The next change is awaited across board wake-ups, never cancelled mid-fetch (the tail
    # would see a gap and reopen its consumer); board waits are cheap to cancel.
    next_change = asyncio.create_task(_next(changes))
    moved: asyncio.Task[int] | None = None
    last: SessionUpdate | None = None
    try:
        while True:
            if moved is None and last is not None and last.change.status is PENDING:
                moved = asyncio.create_task(board.changed(board.generation))
            waiting = {next_change} if moved is None else {next_change, moved}
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if next_change.done():
                try:
                    change = next_change.result()
                except StopAsyncIteration:
                    return
                next_change = asyncio.create_task(_next(changes))
                last = SessionUpdate(change, _queue(board, session_id, change))
                yield last
            elif moved is not None and last is not None:
                moved = None
                queue = _queue(board, session_id, last.change)
                # Only a known position that moved is news; off the board (placed, or
                # cancelled) the next status change says what happened.
                if queue is not None and (last.queue is None or queue[0] != last.queue[0]):
                    last = SessionUpdate(last.change, queue)
                    yield last
            if moved is not None and (last is None or last.change.status is not PENDING):
                moved.cancel()
                moved = None
    finally:
        for task in (next_change, moved):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await task
        await changes.aclose()


async def _next(changes: AsyncIterator[StatusEntry]) -> StatusEntry:
    return await anext(changes)


def _queue(board: QueueBoard, session_id: str, change: StatusEntry) -> tuple[int, int] | None:
    return board.position(session_id) if change.status is PENDING else None
