"""The GraphQL session subscriptions. Each reads the log through a JetStream consumer (never a
core subscription), authorises on the log, not the view (who may read a session is decided on
its first event's owner), and writes nothing.

- ``sessionStatus``: one session's status changes from ``ev.session.<id>``, with its queue
  position from the ``jy-queues`` board while PENDING (``status_feed``), each once the views
  hold it: ``session(id)`` read on hearing of a change answers at least that change.
- ``sessionsAdded``: each session the caller may read that is requested from now on (from the
  console, the CLI, the SDK or anyone who may start sessions for them), once the views hold it.
- ``sessionsChanged``: that, and every status change and queue move of any session the caller
  may read, in batches (each once the views hold it), on one subscription however long the
  list (``list_feed``). Both read ``ev.session.*`` from the log's end.
- ``sessionPulls``: the image pulls a session waits for, with bytes done per layer, from its
  nodes' ``ImagePull*`` facts (``pulls_feed``); ends once it runs or ends.
- ``sessionOutput``: a session's kernel output from any line, then live, from ``JY_OUTPUT``
  (``output.<session id>.*``, ``output_feed``); it ends once the session has ended and all its
  output is delivered. With the rule for reading logs (the owner, or an admin of its domain);
  anyone else is told there is no such session.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import can_act_on_session, can_read_session
from events.bus import Bus
from events.domain.session import SessionRequested
from schemas.ids import check_token
from schemas.subjects import AggregateType, events_of
from schemas.tenancy import SessionOwner
from services.gateway.context import Context, ctx_of, who
from services.gateway.core.live import check_still_valid, tail_from_end
from services.gateway.core.session_owners import owner_named, owner_on_log
from services.gateway.core.views import Views
from services.gateway.sessions.list_feed import SessionChanges, sessions_changed
from services.gateway.sessions.output_feed import OutputChunk, dropped_marker, live_output
from services.gateway.sessions.pulls_feed import PullUpdate, session_pulls
from services.gateway.sessions.status_feed import session_updates
from services.gateway.sessions.types import StatusChange

SETTLE_S = 5.0
"""How long a change waits for the views to hold it (then it goes anyway: a subscriber is
not kept waiting on a stalled projector)."""


@strawberry.type
class StatusSubscription:
    @strawberry.subscription(
        description="One session's status changes, from its first; ends at a final status. "
        "Each is sent once the views hold it (`session(id)` then answers at least it). "
        "While PENDING, each carries its queue position, and a move in the queue is pushed "
        "as the same change again with the new position."
    )
    async def session_status(
        self,
        info: Info[Context, Any],
        id: strawberry.ID,
    ) -> AsyncGenerator[StatusChange, None]:
        session_id = check_token(str(id), "session id")
        ctx = ctx_of(info)
        # From the log, not the view: a session created a moment ago may not be there yet.
        if not can_read_session(who(info), await owner_on_log(ctx, session_id)):
            raise GraphQLError(f"there is no session {id}", extensions={"code": "not-found"})
        async for update in session_updates(ctx.bus, ctx.services.queues, session_id):
            check_still_valid(ctx)
            # Told once the views hold it: a read on hearing of it sees at least this change.
            await ctx.views.wait_for(update.change.seq, SETTLE_S)
            yield StatusChange.of(update.change, update.queue)


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
        description="Every change to the sessions you may read from now on, in batches, each "
        "sent once the views hold it: a session requested (`added`: ask `session(id)`), each "
        "status change, "
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
            reads_all=me.reads_every_domain,
        ):
            check_still_valid(ctx)
            yield batch


@strawberry.type(description="Lines one kernel printed (stdout and stderr, interleaved).")
class KernelOutput:
    kernel_id: str
    position: int = strawberry.field(
        description="The number (0-based) of the first line in the kernel's output; ask with "
        "since = position + the number of lines to go on after these."
    )
    lines: list[str]
    dropped: int = strawberry.field(
        description="Lines asked for, before these, that the output cap dropped (it keeps "
        "the latest of each kernel)."
    )
    notice: str | None = strawberry.field(description="Says so in words when lines were dropped.")

    @classmethod
    def of(cls, chunk: OutputChunk) -> KernelOutput:
        return cls(
            kernel_id=chunk.kernel_id,
            position=chunk.line,
            lines=list(chunk.lines),
            dropped=chunk.dropped,
            notice=dropped_marker(chunk.dropped) if chunk.dropped else None,
        )


@strawberry.type
class OutputSubscription:
    @strawberry.subscription(
        description="A session's kernel output from line `since` (0: the start) of each kernel, "
        "or of one kernel, then live while it runs; ends once the session has ended and all "
        "its output is delivered."
    )
    async def session_output(
        self,
        info: Info[Context, Any],
        id: strawberry.ID,
        since: int = 0,
        kernel: str | None = None,
    ) -> AsyncGenerator[KernelOutput, None]:
        session_id = check_token(str(id), "session id")
        kernel_id = None if kernel is None else check_token(kernel, "kernel id")
        if since < 0:
            raise GraphQLError(f"since must not be negative, got {since}")
        ctx = ctx_of(info)
        # From the log, not the view: a session created a moment ago may not be there yet.
        if not can_act_on_session(who(info), await owner_on_log(ctx, session_id)):
            raise GraphQLError(f"there is no session {id}", extensions={"code": "not-found"})
        async for chunk in live_output(ctx.bus, session_id, kernel_id, since):
            check_still_valid(ctx)
            yield KernelOutput.of(chunk)


@strawberry.type(description="One layer of a pull: bytes fetched of its size (0: not known yet).")
class PullLayer:
    layer: str
    done_bytes: float
    total_bytes: float


@strawberry.type(description="How a pull of the session's image goes on one node.")
class ImagePull:
    node_id: str
    node_name: str = strawberry.field(description="the node's host name (its id if not known)")
    reference: str
    status: str = strawberry.field(description="pulling | finished | failed")
    done_bytes: float = strawberry.field(description="fetched so far, all layers together")
    total_bytes: float = strawberry.field(description="to fetch (grows as layers start)")
    layers: list[PullLayer]
    cause: str = strawberry.field(description="why it failed: authentication, not-found, …")
    reason: str

    @classmethod
    def of(cls, u: PullUpdate, node_name: str) -> ImagePull:
        return cls(
            node_id=u.node_id, node_name=node_name, reference=u.reference, status=u.status,
            done_bytes=u.done_bytes, total_bytes=u.total_bytes, cause=u.cause, reason=u.reason,
            layers=[PullLayer(layer=x.layer, done_bytes=x.done_bytes, total_bytes=x.total_bytes)
                    for x in u.layers],
        )  # fmt: skip


@strawberry.type
class PullSubscription:
    @strawberry.subscription(
        description="The image pulls a session waits for, as its nodes report them (bytes done "
        "and to do, per layer); ends once the session runs or ends."
    )
    async def session_pulls(
        self, info: Info[Context, Any], id: strawberry.ID
    ) -> AsyncGenerator[ImagePull, None]:
        session_id = check_token(str(id), "session id")
        ctx = ctx_of(info)
        if not can_read_session(who(info), await owner_on_log(ctx, session_id)):
            raise GraphQLError(f"there is no session {id}", extensions={"code": "not-found"})
        names: dict[str, str] = {}
        async for update in session_pulls(ctx.bus, session_id):
            check_still_valid(ctx)
            if update.node_id not in names:  # once per node: a session has a few
                views = await ctx.views.nodes()
                names.update({v.id: v.hostname or v.id for v in views})
            yield ImagePull.of(update, names.get(update.node_id, update.node_id))
