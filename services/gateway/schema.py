"""The GraphQL schema: queries over projections, mutations that send commands and return their
outcomes, and a subscription that streams one session's status changes from JetStream. Every
resolver authorises its caller (``commands/authorisation.py``); the admin and account parts
live in their own modules and are merged here.

Reads: the views (SQL), ``out.<command id>``, ``ev.session.<id>`` (through a JetStream consumer,
never a core subscription), queue positions (the ``jy-queues`` board the gateway watches).
Writes: ``cmd.session.*``.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.tools import merge_types
from strawberry.types import Info

from commands.authorisation import (
    Principal,
    can_act_on_session,
    can_create_session,
    can_read_session,
)
from commands.messages import TerminateSession
from commands.outcome import Outcome
from events.store import EventStore
from events.writes import AggregateRef
from projections.queries import SessionView
from projections.session_tables import SessionRecord
from schemas.ids import check_token, session_id_for
from schemas.session import SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import Role, SessionOwner, project_id_for
from services.gateway.account_schema import AccountMutation, AccountQuery
from services.gateway.admin_schema import AdminMutation, AdminQuery
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.feed import session_updates
from services.gateway.inputs import InputError, create_session_command
from services.gateway.limits import limits
from services.gateway.logs import read_logs
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

MAX_PAGE = 500


def _owner_of(record: SessionRecord) -> SessionOwner | None:
    if record.access_key is None or record.user_id is None or record.domain is None:
        return None
    return SessionOwner(
        access_key=record.access_key,
        user_id=record.user_id,
        project_id=record.project_id or "",
        domain=record.domain,
    )


async def _visible_session(info: Info[Context, Any], session_id: str) -> SessionView | None:
    """The session if the caller may read it; another tenant's looks like no session."""
    principal = who(info)
    view = await ctx_of(info).views.session(session_id)
    if view is None or not can_read_session(principal, _owner_of(view.record)):
        return None
    return view


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
    gpu: str = strawberry.field(
        default="0",
        description="GPUs per kernel: a whole number takes whole devices (2); any other "
        "amount takes shares in hundredths (0.25, 1.5)",
    )
    command: list[str] | None = None
    env: list[EnvVar] | None = None
    name: str | None = None
    resource_group: str | None = None
    project: str | None = strawberry.field(
        default=None, description="project name in your domain; optional if you have one"
    )
    priority: int | None = strawberry.field(default=None, description="0-100, default 10")
    cluster_size: int | None = strawberry.field(
        default=None, description="kernels, 1-64 (default 1), each with cpu, memory and gpu"
    )
    cluster_mode: str | None = strawberry.field(
        default=None, description="single-node (default: all kernels on one node) | multi-node"
    )
    depends_on: list[str] | None = strawberry.field(
        default=None, description="session ids (up to 16) that must succeed first"
    )
    starts_at: datetime | None = strawberry.field(
        default=None, description="not placed before this time (with a time zone)"
    )
    timeout_seconds: int | None = strawberry.field(
        default=None, description="batch only: terminate this long after it starts running"
    )
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
class SessionQuery:
    @strawberry.field(description="Sessions, oldest first (Relay cursor pagination).")
    async def sessions(
        self,
        info: Info[Context, Any],
        first: int = 50,
        after: str | None = None,
        status: str | None = None,
    ) -> SessionConnection:
        principal = who(info)
        if not 1 <= first <= MAX_PAGE:
            raise GraphQLError(f"first must be between 1 and {MAX_PAGE}, got {first}")
        # The filter is the authorisation: a user's page never holds anyone else's rows.
        domain = None if principal.is_superadmin else principal.domain
        user_id = principal.user_id if principal.role is Role.USER else None
        page = await ctx_of(info).views.sessions(
            first=first, after=after, status=status, domain=domain, user_id=user_id
        )
        edges = [SessionEdge(cursor=v.cursor, node=Session.of(v)) for v in page.rows]
        return SessionConnection(
            edges=edges,
            page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor),
        )

    @strawberry.field
    async def session(self, info: Info[Context, Any], id: strawberry.ID) -> Session | None:
        view = await _visible_session(info, str(id))
        return None if view is None else Session.of(view)

    @strawberry.field(description="A session's kernel output (stdout and stderr, interleaved).")
    async def session_logs(self, info: Info[Context, Any], id: strawberry.ID) -> str | None:
        ctx = ctx_of(info)
        view = await _visible_session(info, str(id))
        if view is None or not can_act_on_session(who(info), _owner_of(view.record)):
            return None
        parts = [await read_logs(ctx.bus, kernel_id) for kernel_id in view.record.kernel_ids]
        found = [p for p in parts if p is not None]
        return "".join(found) if found else None

    @strawberry.field
    async def nodes(self, info: Info[Context, Any]) -> list[Node]:
        principal = who(info)
        if principal.role is Role.USER:
            raise forbidden(info, "only administrators and monitors may list nodes")
        return [Node.of(view) for view in await ctx_of(info).views.nodes()]

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
        return _outcome(outcome, str(id), session)


@strawberry.type
class SessionMutation:
    @strawberry.mutation(description="Ask for a compute session; waits a bounded time.")
    async def create_session(
        self,
        info: Info[Context, Any],
        input: CreateSessionInput,
    ) -> CommandOutcome:
        ctx = ctx_of(info)
        principal = who(info)
        if principal.role is Role.MONITOR:
            raise forbidden(info, "monitors cannot create sessions")
        project_id = _project_of(ctx, principal, input.project)
        if not can_create_session(principal, project_id):
            raise forbidden(info, "you are not a member of that project")
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
            "priority": input.priority,
            "cluster_size": input.cluster_size,
            "cluster_mode": input.cluster_mode,
            "depends_on": input.depends_on,
            "starts_at": input.starts_at,
            "timeout_s": input.timeout_seconds,
        }
        try:
            command = create_session_command(
                raw,
                actor=principal.actor,
                tenant=principal.tenant(project_id),
                command_id=input.client_command_id,
                owner=ctx.directory.owner(principal, project_id),
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
        ctx = ctx_of(info)
        principal = who(info)
        view = await _visible_session(info, check_token(str(id), "session id"))
        if view is None or not can_act_on_session(principal, _owner_of(view.record)):
            raise GraphQLError(f"there is no session {id}", extensions={"code": "not-found"})
        try:
            command = TerminateSession(
                actor=principal.actor,
                tenant=principal.tenant(view.record.project_id),
                session_id=str(id),
                reason=reason,
            )
        except ValueError as exc:
            raise GraphQLError(str(exc), extensions={"code": "invalid"}) from exc
        outcome = await ctx.commands.execute(command, timeout=ctx.settings.command_timeout_s)
        await _read_your_writes(ctx, outcome)
        return _outcome(outcome, command.command_id, str(id))


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
        if not can_read_session(who(info), await _owner_on_log(ctx, session_id)):
            raise GraphQLError(f"there is no session {id}", extensions={"code": "not-found"})
        async for update in session_updates(ctx.bus, ctx.services.queues, session_id):
            # A principal whose keypair or account was deactivated meanwhile gets no more.
            principal = ctx.principal
            if principal is None or ctx.directory.principal(principal.actor) is None:
                raise GraphQLError("your credentials are no longer valid")
            yield StatusChange.of(update.change, update.queue)


async def _owner_on_log(ctx: Context, session_id: str) -> SessionOwner | None:
    """The owner its first event names; raises "no session" if there is no first event."""
    history = await EventStore(ctx.bus).read(AggregateRef(AggregateType.SESSION, session_id))
    if not history.events:
        raise GraphQLError(f"there is no session {session_id}", extensions={"code": "not-found"})
    requested = history.events[0].envelope.payload.get("owner")
    return None if requested is None else SessionOwner.model_validate(requested)


def _project_of(ctx: Context, principal: Principal, name: str | None) -> str:
    """The project a new session is charged to: the one named (in the caller's domain), or
    the caller's only project."""
    if name is not None:
        project_id = project_id_for(principal.domain, name)
        if project_id not in ctx.directory.projects:
            raise GraphQLError(
                f"there is no project {name!r} in domain {principal.domain}",
                extensions={"code": "not-found"},
            )
        return project_id
    if len(principal.projects) == 1:
        return next(iter(principal.projects))
    have = sorted(
        ctx.directory.projects[p].name for p in principal.projects if p in ctx.directory.projects
    )
    raise GraphQLError(
        "say which project the session is for (input.project): "
        + (f"you are in {', '.join(have)}" if have else "you are in no project yet"),
        extensions={"code": "invalid"},
    )


Query = merge_types("Query", (SessionQuery, AdminQuery, AccountQuery))
Mutation = merge_types("Mutation", (SessionMutation, AdminMutation, AccountMutation))
schema = strawberry.Schema(
    query=Query, mutation=Mutation, subscription=Subscription, extensions=limits()
)
