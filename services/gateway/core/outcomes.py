"""What a command's outcome answers the client: accepted (with the seq of its last
event), not decided yet, or a GraphQL error carrying the rejection's code; and the bounded wait
after an accepted one until the views hold its events. Reads the views' positions; no
subjects."""

from __future__ import annotations

import asyncio

import strawberry
from graphql import GraphQLError

from commands.directory import Directory
from commands.outcome import Outcome
from services.gateway.context import Context
from services.gateway.core.types import CommandOutcome, OutcomeStatus

SETTLE_STEP_S = 0.01


def command_answer(
    outcome: Outcome | None, command_id: str, session_id: str | None
) -> CommandOutcome:
    if outcome is None:
        return CommandOutcome(
            command_id=strawberry.ID(command_id),
            status=OutcomeStatus.PENDING,
            code=None,
            message="not decided yet: ask commandOutcome(id) later",
            session_id=strawberry.ID(session_id) if session_id else None,
            seq=None,
        )
    if not outcome.accepted:
        raise GraphQLError(
            outcome.message, extensions={"code": outcome.code, "commandId": command_id}
        )
    return CommandOutcome(
        command_id=strawberry.ID(command_id),
        status=OutcomeStatus.ACCEPTED,
        code=None,
        message=outcome.message,
        session_id=strawberry.ID(session_id) if session_id else None,
        seq=max(outcome.event_seqs) if outcome.event_seqs else None,
    )


async def directory_holds(ctx: Context, outcome: Outcome | None) -> None:
    """After an accepted tenancy command, wait (bounded) until the directory holds its events,
    so the caller's next query sees what its mutation did."""
    if outcome is None or not outcome.accepted or not outcome.event_seqs:
        return
    await directory_reaches(ctx.directory, max(outcome.event_seqs), ctx.settings.read_your_writes_s)


async def directory_reaches(directory: Directory, seq: int, within_s: float) -> None:
    """Wait (at most ``within_s``) until the gateway's directory has folded log position
    ``seq``."""
    # The directory has no wake-up to wait on; a short poll of an in-memory fold is cheap.
    for _ in range(int(within_s / SETTLE_STEP_S)):
        # Own writes applied from the ack leave the position behind but set the guard.
        if directory.position >= seq or max(directory.guards.values(), default=0) >= seq:
            return
        await asyncio.sleep(SETTLE_STEP_S)


async def read_your_writes(ctx: Context, outcome: Outcome | None) -> None:
    """After an accepted command, wait (bounded) until the views hold its events, so the
    client's next query sees what its mutation did."""
    if outcome is not None and outcome.accepted and outcome.event_seqs:
        await ctx.views.wait_for(max(outcome.event_seqs), ctx.settings.read_your_writes_s)
