"""The GraphQL session mutations: create a session and terminate one. Each authorises its
caller, sends its command, waits a bounded time for the outcome and for the views to hold it.
A create that no node of its group could ever hold is refused here (``fit``, code
``too-large``), naming the largest node. Writes ``cmd.session.*``; reads ``out.<command id>``,
the sessions view and the nodes view."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import can_act_on_session, can_create_session
from commands.messages import TerminateSession
from schemas.ids import check_token, session_id_for
from schemas.session import SessionType
from services.gateway.context import Context, ctx_of, forbidden, invalid, who
from services.gateway.core.charged_project import charged_project
from services.gateway.core.inputs import InputError
from services.gateway.core.outcomes import command_answer, read_your_writes
from services.gateway.core.session_owners import owner_of, visible_session
from services.gateway.core.types import CommandOutcome
from services.gateway.sessions.fit import refusal
from services.gateway.sessions.inputs import create_session_command


@strawberry.input
class EnvVar:
    name: str
    value: str


@strawberry.input
class MountInput:
    folder: str = strawberry.field(description="a folder's id, or its name as you see it")
    path: str | None = strawberry.field(
        default=None, description="where it appears in the container; default /home/work/<name>"
    )
    read_only: bool = strawberry.field(
        default=False, description="mounted read-only (a read-only share always is)"
    )


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
    requeue_on_node_loss: bool | None = strawberry.field(
        default=None,
        description="batch only: placed again (up to 3 times) if its node is lost, instead of "
        "ending node-lost (default false)",
    )
    mounts: list[MountInput] | None = strawberry.field(
        default=None,
        description="virtual folders to mount (up to 32), by id or name; your dot-folders and "
        "your project's are mounted too",
    )
    client_command_id: str | None = strawberry.field(
        default=None, description="idempotency key: the same id never creates a second session"
    )


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
        if principal.read_only:
            raise forbidden(info, f"{principal.role.value}s cannot create sessions")
        project_id = charged_project(ctx, principal, input.project, "session")
        if not can_create_session(principal, project_id):
            raise forbidden(info, "you are not a member of that project")
        if input.type == SessionType.INFERENCE:
            # An endpoint's replicas: only the serving controller asks for them.
            raise invalid("type inference is for endpoints' replicas: use createEndpoint")
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
            "requeue_on_node_loss": input.requeue_on_node_loss,
            "mounts": [
                {"folder": m.folder, "path": m.path, "read_only": m.read_only}
                for m in input.mounts or []
            ],
        }
        try:
            command = create_session_command(
                raw,
                actor=principal.actor,
                tenant=principal.tenant(project_id),
                command_id=input.client_command_id,
                owner=ctx.directory.owner(principal, project_id),
                limits=ctx.services.limits,
            )
        except InputError as exc:
            raise GraphQLError(str(exc), extensions={"code": "invalid"}) from exc
        spec = command.spec
        policy = ctx.directory.group_scheduling(spec.resource_group)
        too_large = refusal(spec, await ctx.views.nodes(), policy)
        if too_large is not None:
            raise GraphQLError(too_large, extensions={"code": "too-large"})
        for dependency in command.spec.depends_on:
            # Only sessions the caller may read: another tenant's looks like none.
            if await visible_session(info, dependency) is None:
                raise GraphQLError(
                    f"dependsOn names {dependency}, which is no session you can see",
                    extensions={"code": "not-found"},
                )
        outcome = await ctx.commands.execute(command, timeout=ctx.settings.command_timeout_s)
        await read_your_writes(ctx, outcome)
        return command_answer(outcome, command.command_id, session_id_for(command.command_id))

    @strawberry.mutation(description="Stop a session: PENDING ones are cancelled.")
    async def terminate_session(
        self,
        info: Info[Context, Any],
        id: strawberry.ID,
        reason: str = "user request",
    ) -> CommandOutcome:
        ctx = ctx_of(info)
        principal = who(info)
        view = await visible_session(info, check_token(str(id), "session id"))
        if view is None or not can_act_on_session(principal, owner_of(view.record)):
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
        await read_your_writes(ctx, outcome)
        return command_answer(outcome, command.command_id, str(id))
