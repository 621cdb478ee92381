# mypy: disable-error-code="untyped-decorator"
# (strawberry's decorators with arguments are untyped in its stubs; the resolvers are typed)
"""Subscriptions that keep a list of sessions current without polling. ``sessionsAdded``: each
session the caller may read that is requested from now on (from the console, the CLI, the SDK
or anyone who may start sessions for them), once the views hold it. ``sessionsChanged``: that,
and every status change and queue move of any session the caller may read, in batches, on one
subscription however long the list (``sessions_feed``). Both read ``ev.session.*`` through a
JetStream consumer from the log's end (never a core subscription); who may read a session is
decided on its first event's owner, as for ``sessionStatus``. Write nothing."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

import strawberry
from strawberry.types import Info

from commands.authorisation import can_read_session
from events.bus import Bus
from events.domain.session import SessionRequested
from schemas.subjects import AggregateType, events_of
from schemas.tenancy import SessionOwner
from services.gateway.context import Context, ctx_of, who
from services.gateway.live import check_still_valid, tail_from_end
from services.gateway.session_lookup import owner_named
from services.gateway.sessions_feed import SessionChanges, sessions_changed
from services.gateway.views import Views

SETTLE_S = 5.0
"""How long an addition waits for the views to hold the session (then it goes anyway)."""
REQUESTED = SessionRequested.event_name


@strawberry.type(description="A session you may read was requested: ask `session(id)`.")
class SessionAdded:
    id: strawberry.ID
    seq: int = strawberry.field(description="its first event's log position")


async def sessions_added(
    bus: Bus, views: Views, may_read: Callable[[SessionOwner | None], bool], *, poll_s: float = 1.0
) -> AsyncGenerator[SessionAdded, None]:
    """Sessions requested from now on that ``may_read`` lets through, each once the views hold
    it (or ``SETTLE_S`` later)."""
    # Only the first event of each session is decoded: the others are skipped by name.
    tail = await tail_from_end(
        bus, [events_of(AggregateType.SESSION)], names=frozenset({REQUESTED})
    )
    try:
        while True:
            batch = await tail.fetch_readable(timeout=poll_s)
            found = [event for event in batch if may_read(owner_named(event))]
            if not found:
                continue
            await views.wait_for(found[-1].seq, SETTLE_S)
            for event in found:
                yield SessionAdded(id=strawberry.ID(event.envelope.aggregate_id), seq=event.seq)
    finally:
        await tail.close()


@strawberry.type
class SessionsSubscription:
    @strawberry.subscription(
        description="Each session you may read that is requested from now on, once the views "
        "hold it: a list of sessions stays complete without polling (follow each one's "
        "changes with `sessionStatus`)."
    )
    async def sessions_added(self, info: Info[Context, Any]) -> AsyncGenerator[SessionAdded, None]:
        me = who(info)
        ctx = ctx_of(info)
        async for added in sessions_added(
            ctx.bus, ctx.views, lambda owner: can_read_session(me, owner)
        ):
            check_still_valid(ctx)
            yield added

    @strawberry.subscription(
        description="Every change to the sessions you may read from now on, in batches: a "
        "session requested (`added`: ask `session(id)`, the views hold it), each status change, "
        "and while PENDING each move in its queue. `pending`: sessions your list already shows "
        "waiting, whose queue moves you want too (at most 500). `after`: start after this log "
        "position (a `sessions` page's `seq`, or the last change's), so nothing between "
        "reading a list and following it is missed; at most 100,000 back. One subscription "
        "keeps a whole list live."
    )
    async def sessions_changed(
        self,
        info: Info[Context, Any],
        pending: list[strawberry.ID] | None = None,
        after: int | None = None,
    ) -> AsyncGenerator[SessionChanges, None]:
        me = who(info)
        ctx = ctx_of(info)
        async for batch in sessions_changed(
            ctx,
            lambda owner: can_read_session(me, owner),
            [str(p) for p in pending or []],
            after=after,
            reads_all=me.is_superadmin,
        ):
            check_still_valid(ctx)
            yield batch
