"""The GraphQL subscription: one session's status changes, streamed from ``ev.session.<id>``
through a JetStream consumer (never a core subscription), with its queue position from the
``jy-queues`` board while PENDING. Authorises on the log, not the view."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import can_read_session
from schemas.ids import check_token
from services.gateway.context import Context, ctx_of, who
from services.gateway.feed import session_updates
from services.gateway.live import check_still_valid
from services.gateway.session_lookup import owner_on_log
from services.gateway.types import StatusChange


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="One session's status changes, from its first; ends at a final status. "
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
            yield StatusChange.of(update.change, update.queue)
