"""One live feed for a whole list of sessions (``sessionsChanged``): every session the caller may
read that is requested from now on, every status change of any of them, and the queue moves of
the waiting ones, in batches. A page of 2,000 rows follows it on one subscription instead of
one ``sessionStatus`` each (a connection carries at most 100, and each costs a consumer).

Reads ``ev.session.*`` through a JetStream consumer from the log's end (only status events are
decoded), the queue board (``jy-queues``) for positions, the views' position (a batch is sent
once they hold it), and, for a session first met in the middle of its life, the sessions view
(or its first event) for its owner. Writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import replace
from datetime import datetime

import strawberry
from graphql import GraphQLError

from events.envelope import StoredEvent
from events.queues import QueueBoard
from events.store import EventStore
from events.tail import Tail
from schemas.ids import check_token
from schemas.session import SessionStatus
from schemas.subjects import AggregateType, events_of
from schemas.tenancy import SessionOwner
from services.gateway.context import Context, invalid
from services.gateway.core.session_owners import owner_named, owner_of, owner_on_log
from services.gateway.sessions.status_feed import STATUS_OF

MAX_PENDING = 500
"""Waiting sessions a subscriber may name to follow their queue moves."""
MAX_FOLLOWED = 2_000
"""Waiting sessions followed at once (named, and those requested since)."""
MAX_KNOWN = 50_000
"""Sessions whose readability is remembered; past it the memory starts again."""
MAX_BEHIND = 100_000
"""How far back in the log a subscriber may ask to start (``after``)."""
SETTLE_S = 5.0
"""How long a batch waits for the views to hold its changes (then it goes anyway)."""
REQUESTED = "SessionRequested"
PENDING = SessionStatus.PENDING


@strawberry.type(description="One change to a session you may read.")
class SessionChange:
    id: strawberry.ID
    added: bool = strawberry.field(
        description="it was requested now (its first event): ask `session(id)` for its row"
    )
    status: str
    reason: str
    at: datetime
    seq: int = strawberry.field(
        description="the event's log position; a queue move repeats its last change's seq"
    )
    queue_position: int | None = strawberry.field(
        default=None, description="while PENDING: 1-based place in its group's queue, if known"
    )
    queue_length: int | None = strawberry.field(
        default=None, description="how many wait in its group, when queuePosition is known"
    )


@strawberry.type(description="Changes read together, in log order.")
class SessionChanges:
    changes: list[SessionChange]


class _Readers:
    """Which sessions the subscriber may read, remembered: a session's owner comes from its
    first event when the feed sees it, else from the views (or the log, if they lag)."""

    def __init__(self, ctx: Context, may_read: Callable[[SessionOwner | None], bool]) -> None:
        self._ctx, self._may_read = ctx, may_read
        self._known: dict[str, bool] = {}

    def note(self, session_id: str, owner: SessionOwner | None) -> bool:
        if len(self._known) >= MAX_KNOWN:
            self._known.clear()
        self._known[session_id] = allowed = self._may_read(owner)
        return allowed

    async def may(self, session_id: str) -> bool:
        known = self._known.get(session_id)
        if known is not None:
            return known
        view = await self._ctx.views.session(session_id)
        if view is not None:
            return self.note(session_id, owner_of(view.record))
        try:
            return self.note(session_id, await owner_on_log(self._ctx, session_id))
        except GraphQLError:  # no such session: nothing to read
            return False


def _change(
    session_id: str,
    status: SessionStatus,
    reason: str,
    at: datetime,
    seq: int,
    board: QueueBoard,
    *,
    added: bool = False,
) -> SessionChange:
    """A change, with the session's queue place now while it is PENDING."""
    queue = board.position(session_id) if status is PENDING else None
    return SessionChange(
        id=strawberry.ID(session_id),
        added=added,
        status=status.value,
        reason=reason,
        at=at,
        seq=seq,
        queue_position=None if queue is None else queue[0],
        queue_length=None if queue is None else queue[1],
    )


class _Feed:
    def __init__(
        self, ctx: Context, may_read: Callable[[SessionOwner | None], bool], reads_all: bool
    ) -> None:
        self.ctx = ctx
        self.board = ctx.services.queues
        self.readers = _Readers(ctx, may_read)
        self.reads_all = reads_all
        self.waiting: dict[str, SessionChange] = {}
        """The followed waiting sessions: the last change sent of each (its queue place)."""

    async def named(self, pending: Iterable[str]) -> list[SessionChange]:
        """Follow the waiting sessions a page names (those it may read, still PENDING), and
        their queue places now."""
        out = []
        for view in await self.ctx.views.sessions_by_id(list(pending)):
            record = view.record
            if record.status != PENDING.value or not self.readers.note(record.id, owner_of(record)):
                continue
            at, seq = record.created_at, record.created_seq
            if view.history:  # its last change
                at, seq = view.history[-1].at, view.history[-1].seq
            change = _change(record.id, PENDING, record.status_reason, at, seq, self.board)
            self._follow(record.id, change)
            out.append(change)
        return out

    async def of_events(self, events: list[StoredEvent]) -> list[SessionChange]:
        out = []
        for event in events:
            session_id = event.envelope.aggregate_id
            if event.name == REQUESTED:
                allowed = self.reads_all or self.readers.note(session_id, owner_named(event))
            else:
                allowed = self.reads_all or await self.readers.may(session_id)
            if not allowed:
                continue
            status = STATUS_OF[event.name]
            envelope = event.envelope
            reason = str(envelope.payload.get("reason", ""))
            change = _change(
                session_id, status, reason, envelope.occurred_at, event.seq, self.board,
                added=event.name == REQUESTED,
            )  # fmt: skip
            if status is PENDING:
                self._follow(session_id, change)
            else:
                self.waiting.pop(session_id, None)
            out.append(change)
        return out

    def moves(self) -> list[SessionChange]:
        """The followed waiting sessions whose known place changed since last sent (off the
        board, the next status change says what happened)."""
        out = []
        for session_id, last in self.waiting.items():
            queue = self.board.position(session_id)
            if queue is None or queue[0] == last.queue_position:
                continue
            moved = replace(last, queue_position=queue[0], queue_length=queue[1])
            self.waiting[session_id] = moved
            out.append(moved)
        return out

    def _follow(self, session_id: str, change: SessionChange) -> None:
        if session_id in self.waiting or len(self.waiting) < MAX_FOLLOWED:
            self.waiting[session_id] = change


async def sessions_changed(
    ctx: Context,
    may_read: Callable[[SessionOwner | None], bool],
    pending: list[str],
    *,
    after: int | None = None,
    reads_all: bool = False,
    poll_s: float = 1.0,
) -> AsyncGenerator[SessionChanges, None]:
    """Batches of changes to the sessions ``may_read`` lets through (``reads_all``: every
    session, no owner looked up), from the log position after ``after`` (None: from now);
    first, if ``pending`` names waiting sessions, their queue places now."""
    if len(pending) > MAX_PENDING:
        raise invalid(f"at most {MAX_PENDING} pending sessions, got {len(pending)}")
    named = list(dict.fromkeys(check_token(p, "session id") for p in pending))
    feed = _Feed(ctx, may_read, reads_all)
    subjects, names = [events_of(AggregateType.SESSION)], frozenset(STATUS_OF)
    end = await EventStore(ctx.bus).stream_last_seq()
    if after is None or after >= end:
        tail = Tail(ctx.bus, from_seq=end + 1, subjects=subjects, names=names)
    elif after < 0 or end - after > MAX_BEHIND:
        raise invalid(
            f"after must be a log position at most {MAX_BEHIND} behind the end ({end}), got "
            f"{after}: read the list again"
        )
    else:
        tail = Tail(ctx.bus, from_seq=after + 1, subjects=subjects, names=names)
    board = feed.board
    # A fetch is never cancelled mid-way (the tail would see a gap and reopen its consumer);
    # board waits are cheap to cancel.
    fetching = asyncio.create_task(tail.fetch_readable(timeout=poll_s))
    moved: asyncio.Task[int] | None = None
    try:
        since = board.generation
        first = await feed.named(named)
        if first:
            yield SessionChanges(changes=first)
        while True:
            if moved is None and feed.waiting:
                moved = asyncio.create_task(board.changed(since))
            await asyncio.wait({fetching} if moved is None else {fetching, moved},
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
            changes: list[SessionChange] = []
            if fetching.done():
                events = fetching.result()
                fetching = asyncio.create_task(tail.fetch_readable(timeout=poll_s))
                changes.extend(await feed.of_events(events))
            if moved is not None and moved.done():
                moved = None
                since = board.generation
                changes.extend(feed.moves())
            if not changes:
                continue
            # Sent once the views hold every change in it: a read on hearing of a change
            # (``session(id)``, a page) sees at least that change.
            await ctx.views.wait_for(max(c.seq for c in changes), SETTLE_S)
            yield SessionChanges(changes=changes)
    finally:
        for task in (fetching, moved):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await tail.close()
