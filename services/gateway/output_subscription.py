"""The GraphQL subscription ``sessionOutput``: a session's kernel output from any line, then
live, read from ``JY_OUTPUT`` through an ordered JetStream consumer (``output_feed``); it ends
once the session has ended and all its output is delivered. Authorised on the log, as
``sessionStatus`` is, with the rule for reading logs (the owner, or an admin of its domain);
anyone else is told there is no such session. Reads ``ev.session.<id>`` and
``output.<session id>.*``; writes nothing."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import can_act_on_session
from schemas.ids import check_token
from services.gateway.context import Context, ctx_of, who
from services.gateway.live import check_still_valid
from services.gateway.output_feed import OutputChunk, dropped_marker, live_output
from services.gateway.session_lookup import owner_on_log


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
