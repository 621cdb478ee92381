"""The GraphQL schema: queries over projections, mutations that send commands and return their
outcomes, and a subscription that streams one session's status changes from JetStream.

Reads: the views (SQL), ``out.<command id>``, ``ev.session.<id>`` (through a JetStream consumer,
never a core subscription). Writes: ``cmd.session.*``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.bus import CommandBus
from commands.messages import TerminateSession
from commands.outcome import Outcome
from events.bus import Bus
from schemas.ids import check_token, session_id_for
from schemas.principal import Actor, Tenant
from schemas.session import SessionType
from services.gateway.feed import session_status_changes
from services.gateway.inputs import InputError, create_session_command
from services.gateway.logs import read_logs
from services.gateway.settings import GatewaySettings
from services.gateway.types import (
    CommandOutcome,
    Node,
    OutcomeStatus,
    PageInfo,
    Session,
    SessionConnection,
    SessionEdge,
    StatusChange,
)
from services.gateway.views import Views

MAX_PAGE = 500


@dataclass
class Context:
    views: Views
    commands: CommandBus
    bus: Bus
    settings: GatewaySettings
    # Authentication comes with tenancy; until then every request acts as this principal.
    actor: Actor
    tenant: Tenant


def _ctx(info: Info[Context, Any]) -> Context:
    return info.context


@strawberry.input
class EnvVar:
    name: str
    value: str


@strawberry.input
class CreateSessionInput:
    image: str
    type: str = strawberry.field(default="interactive", description="interactive | batch")
    cpu: str = strawberry.field(default="1", description="cores, e.g. 0.5")
    memory: str = strawberry.field(default="256m", description="bytes or with a unit: 512m, 2g")
    gpu: str = strawberry.field(default="0", description="whole devices for now, e.g. 1")
    command: list[str] | None = None
    env: list[EnvVar] | None = None
    name: str | None = None
    resource_group: str | None = None
    client_command_id: str | None = strawberry.field(
        default=None, description="idempotency key: the same id never creates a second session"
    )


def _outcome(outcome: Outcome | None, command_id: str, session_id: str | None) -> CommandOutcome:
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


async def _read_your_writes(ctx: Context, outcome: Outcome | None) -> None:
    """After an accepted command, wait (bounded) until the views hold its events, so the
    client's next query sees what its mutation did."""
    if outcome is not None and outcome.accepted and outcome.event_seqs:
        await ctx.views.wait_for(max(outcome.event_seqs), ctx.settings.read_your_writes_s)


@strawberry.type
class Query:
    @strawberry.field(description="Sessions, oldest first (Relay cursor pagination).")
    async def sessions(
        self,
        info: Info[Context, Any],
        first: int = 50,
        after: str | None = None,
        status: str | None = None,
    ) -> SessionConnection:
        if not 1 <= first <= MAX_PAGE:
            raise GraphQLError(f"first must be between 1 and {MAX_PAGE}, got {first}")
        page = await _ctx(info).views.sessions(first=first, after=after, status=status)
        edges = [
            SessionEdge(cursor=c, node=Session.of(r))
            for r, c in zip(page.rows, page.cursors, strict=True)
        ]
        end = page.cursors[-1] if page.cursors else None
        return SessionConnection(
            edges=edges, page_info=PageInfo(has_next_page=page.has_next, end_cursor=end)
        )

    @strawberry.field
    async def session(self, info: Info[Context, Any], id: strawberry.ID) -> Session | None:
        row = await _ctx(info).views.session(str(id))
        return None if row is None else Session.of(row)

    @strawberry.field(description="A session's kernel output (stdout and stderr, interleaved).")
    async def session_logs(self, info: Info[Context, Any], id: strawberry.ID) -> str | None:
        ctx = _ctx(info)
        row = await ctx.views.session(str(id))
        if row is None:
            return None
        parts = [await read_logs(ctx.bus, kernel_id) for kernel_id in row.kernel_ids]
        found = [p for p in parts if p is not None]
        return "".join(found) if found else None

    @strawberry.field
    async def nodes(self, info: Info[Context, Any]) -> list[Node]:
        return [Node.of(row) for row in await _ctx(info).views.nodes()]

    @strawberry.field(description="The outcome of a command sent earlier, if decided.")
    async def command_outcome(
        self,
        info: Info[Context, Any],
        id: strawberry.ID,
    ) -> CommandOutcome | None:
        outcome = await _ctx(info).commands.outcome(check_token(str(id), "command id"))
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
        return _outcome(outcome, str(id), session)


@strawberry.type
class Mutation:
    @strawberry.mutation(description="Ask for a compute session; waits a bounded time.")
    async def create_session(
        self,
        info: Info[Context, Any],
        input: CreateSessionInput,
    ) -> CommandOutcome:
        ctx = _ctx(info)
        if input.type not in {t.value for t in SessionType}:
            raise GraphQLError(f"type must be interactive or batch, got {input.type!r}")
        raw = {
            "image": input.image,
            "type": input.type,
            "cpu": input.cpu,
            "memory": input.memory,
            "gpu": input.gpu,
            "command": input.command,
            "env": {e.name: e.value for e in input.env or []},
            "name": input.name,
            "resource_group": input.resource_group,
        }
        try:
            command = create_session_command(
                raw, actor=ctx.actor, tenant=ctx.tenant, command_id=input.client_command_id
            )
        except InputError as exc:
            raise GraphQLError(str(exc), extensions={"code": "invalid"}) from exc
        outcome = await ctx.commands.execute(command, timeout=ctx.settings.command_timeout_s)
        await _read_your_writes(ctx, outcome)
        return _outcome(outcome, command.command_id, session_id_for(command.command_id))

    @strawberry.mutation(description="Stop a session: PENDING ones are cancelled.")
    async def terminate_session(
        self,
        info: Info[Context, Any],
        id: strawberry.ID,
        reason: str = "user request",
    ) -> CommandOutcome:
        ctx = _ctx(info)
        try:
            command = TerminateSession(
                actor=ctx.actor, tenant=ctx.tenant, session_id=str(id), reason=reason
            )
        except ValueError as exc:
            raise GraphQLError(str(exc), extensions={"code": "invalid"}) from exc
        outcome = await ctx.commands.execute(command, timeout=ctx.settings.command_timeout_s)
        await _read_your_writes(ctx, outcome)
        return _outcome(outcome, command.command_id, str(id))


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="One session's status changes, from its first; ends at a final status."
    )
    async def session_status(
        self,
        info: Info[Context, Any],
        id: strawberry.ID,
    ) -> AsyncGenerator[StatusChange, None]:
        session_id = check_token(str(id), "session id")
        async for change in session_status_changes(_ctx(info).bus, session_id):
            yield StatusChange.of(change)


schema = strawberry.Schema(query=Query, mutation=Mutation, subscription=Subscription)
