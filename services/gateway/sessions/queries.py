"""The GraphQL session queries: sessions a page at a time, one session, its logs, and a
command's outcome. Every resolver authorises its caller. Reads the views (SQL), kernel
logs (``jy-logs``, and ``output.<session id>.<kernel id>`` while a kernel runs) and
``out.<command id>``; writes nothing."""

from __future__ import annotations

from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import can_act_on_session
from schemas.ids import check_token
from schemas.tenancy import Role
from services.gateway.context import Context, ctx_of, who
from services.gateway.core.history import AsOf, views_of
from services.gateway.core.outcomes import command_answer
from services.gateway.core.session_owners import owner_of, visible_session
from services.gateway.core.types import CommandOutcome, OutcomeStatus, PageInfo
from services.gateway.sessions.logs import kernel_logs
from services.gateway.sessions.types import Session, SessionConnection, SessionEdge

MAX_PAGE = 500


@strawberry.type
class SessionQuery:
    @strawberry.field(
        description="Sessions, oldest first, or newest first with `newestFirst` (Relay cursor "
        "pagination; a cursor pages only the order it came from)."
    )
    async def sessions(
        self,
        info: Info[Context, Any],
        first: int = 50,
        after: str | None = None,
        status: str | None = None,
        newest_first: bool = False,
        as_of: AsOf | None = None,
    ) -> SessionConnection:
        principal = who(info)
        if not 1 <= first <= MAX_PAGE:
            raise GraphQLError(f"first must be between 1 and {MAX_PAGE}, got {first}")
        # The filter is the authorisation: a user's page never holds anyone else's rows.
        domain = None if principal.reads_every_domain else principal.domain
        user_id = principal.user_id if principal.role is Role.USER else None
        views = await views_of(info, as_of)
        seq = await views.position()  # before the page: the page holds at least this much
        page = await views.sessions(
            first=first,
            after=after,
            status=status,
            domain=domain,
            user_id=user_id,
            newest_first=newest_first,
        )
        past = as_of is not None
        edges = [
            SessionEdge(cursor=page.cursor_of(v), node=Session.of(v, past=past)) for v in page.rows
        ]
        return SessionConnection(
            edges=edges,
            page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor),
            seq=seq,
            counter=lambda: views.count_sessions(status=status, domain=domain, user_id=user_id),
        )

    @strawberry.field
    async def session(
        self, info: Info[Context, Any], id: strawberry.ID, as_of: AsOf | None = None
    ) -> Session | None:
        view = await visible_session(info, str(id), await views_of(info, as_of))
        return None if view is None else Session.of(view, past=as_of is not None)

    @strawberry.field(
        description="A session's kernel output (stdout and stderr, interleaved): so far while "
        "a kernel runs, all that was kept once it ended; null before any."
    )
    async def session_logs(self, info: Info[Context, Any], id: strawberry.ID) -> str | None:
        ctx = ctx_of(info)
        view = await visible_session(info, str(id))
        if view is None or not can_act_on_session(who(info), owner_of(view.record)):
            return None
        parts = [await kernel_logs(ctx.bus, view.record.id, k) for k in view.record.kernel_ids]
        found = [p for p in parts if p is not None]
        return "".join(found) if found else None

    @strawberry.field(description="The outcome of a command sent earlier, if decided.")
    async def command_outcome(
        self,
        info: Info[Context, Any],
        id: strawberry.ID,
    ) -> CommandOutcome | None:
        who(info)
        outcome = await ctx_of(info).commands.outcome(check_token(str(id), "command id"))
        if outcome is None:
            return None
        session = outcome.aggregate_ids[0] if outcome.aggregate_ids else None
        if not outcome.accepted:
            return CommandOutcome(
                command_id=id,
                status=OutcomeStatus.REJECTED,
                code=outcome.code,
                message=outcome.message,
                session_id=None,
                seq=None,
            )
        return command_answer(outcome, str(id), session)
