"""The GraphQL endpoint mutations: create, update (a new revision), scale, modify (bounds,
rules, rollout, openness), destroy, and tokens (create: shown once; revoke). Each resolves the
endpoint the caller names (another user's is not found and nothing is sent), sends its
``cmd.endpoint.<verb>`` command with the owner this request authenticated, waits a bounded
time for the outcome and for the views to hold it, and answers with the endpoint as the views
then hold it. The serving controller decides (``services/serving``). Writes
``cmd.endpoint.*``; reads ``out.<command id>``, the endpoints view and the directory."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import strawberry
from graphql import GraphQLError
from pydantic import ValidationError
from strawberry.types import Info

from commands.authorisation import Principal, can_create_session
from commands.messages import Command, explain
from commands.serving.messages import (
    CreateEndpoint,
    CreateEndpointToken,
    DestroyEndpoint,
    ModifyEndpoint,
    RevokeEndpointToken,
    ScaleEndpoint,
    UpdateEndpoint,
)
from projections.endpoints.tables import EndpointRecord
from schemas.serving import Rollout, Scaling, endpoint_id_for, token_text
from services.gateway.context import Context, ctx_of, forbidden, invalid, who
from services.gateway.core.charged_project import charged_project
from services.gateway.core.inputs import InputError
from services.gateway.core.outcomes import read_your_writes
from services.gateway.core.types import OutcomeStatus
from services.gateway.endpoints.definition import definition_for
from services.gateway.endpoints.inputs import (
    RevisionInput,
    ScalingInput,
    revision_of,
    rollout_of,
    scaling_of,
    validated,
)
from services.gateway.endpoints.lookup import acting_on
from services.gateway.endpoints.types import Endpoint, EndpointOutcome, IssuedEndpointToken

C = TypeVar("C", bound=Command)
DAY_S = 24 * 3600


@strawberry.input
class CreateEndpointInput:
    name: str = strawberry.field(description="3-63 of a-z, 0-9 and '-'; its URL is /e/<name>/")
    revision: RevisionInput
    replicas: int = strawberry.field(default=1, description="desired replicas (0: scaled to zero)")
    scaling: ScalingInput | None = strawberry.field(
        default=None, description="bounds left out: 1..replicas (0..0 for 0 replicas)"
    )
    open_to_public: bool = strawberry.field(
        default=False, description="answer without a token (default: a token is required)"
    )
    project: str | None = strawberry.field(
        default=None, description="project name in your domain; optional if you have one"
    )
    client_command_id: str | None = strawberry.field(
        default=None, description="idempotency key: the same id never creates a second endpoint"
    )


def acting(info: Info[Context, Any]) -> Principal:
    me = who(info)
    if me.read_only:
        raise forbidden(info, f"{me.role.value}s read endpoints; they do not change them")
    return me


def build(cls: type[C], me: Principal, project_id: str, **fields: Any) -> C:
    """The command on behalf of ``me``; bad input is an ``invalid`` error, nothing is sent."""
    try:
        return cls(actor=me.actor, tenant=me.tenant(project_id), **fields)
    except ValidationError as exc:
        raise invalid(explain(exc)) from exc


async def send(info: Info[Context, Any], cmd: Command, endpoint_id: str) -> EndpointOutcome:
    """Execute ``cmd``; a rejection is a GraphQL error carrying its code and command id."""
    ctx = ctx_of(info)
    outcome = await ctx.commands.execute(cmd, timeout=ctx.settings.command_timeout_s)
    await read_your_writes(ctx, outcome)
    if outcome is not None and not outcome.accepted:
        raise GraphQLError(
            outcome.message, extensions={"code": outcome.code, "commandId": cmd.command_id}
        )
    record = await ctx.views.endpoints.get(endpoint_id)
    return EndpointOutcome(
        command_id=strawberry.ID(cmd.command_id),
        status=OutcomeStatus.PENDING if outcome is None else OutcomeStatus.ACCEPTED,
        code=None,
        message="not decided yet: ask commandOutcome(id) later"
        if outcome is None
        else outcome.message,
        endpoint_id=strawberry.ID(endpoint_id),
        endpoint=None if record is None else Endpoint.of(record),
    )


async def latest_revision(info: Info[Context, Any], record: EndpointRecord) -> dict[str, Any]:
    """The fields an update starts from: the revision being rolled to, else the current one."""
    number = record.target_revision or record.current_revision
    found = await ctx_of(info).views.endpoints.revisions(record.id)
    for revision in found:
        if revision.revision == number:
            return revision.spec.model_dump()
    raise GraphQLError(f"endpoint {record.name} has no revision {number} in the views yet")


@strawberry.type
class EndpointMutation:
    @strawberry.mutation(
        description="A model-serving endpoint: its replicas are sessions of yours."
    )
    async def create_endpoint(
        self, info: Info[Context, Any], input: CreateEndpointInput
    ) -> EndpointOutcome:
        me = acting(info)
        ctx = ctx_of(info)
        project_id = charged_project(ctx, me, input.project, "endpoint")
        if not can_create_session(me, project_id):
            raise forbidden(info, "you are not a member of that project")
        owner = ctx.directory.owner(me, project_id)
        try:
            base = await definition_for(info, input.revision)
            spec = revision_of(input.revision, base=base, limits=ctx.services.limits)
            # Bounds left out hold the count asked for: 1..replicas (0..0 when it is 0).
            floor = max(0, min(input.replicas, 1))
            bounds = {"min_replicas": floor, "max_replicas": max(input.replicas, floor)}
            scaling = scaling_of(input.scaling, base=validated(Scaling, bounds, "scaling"))
            rollout = rollout_of(input.scaling, base=Rollout())
        except InputError as exc:
            raise invalid(str(exc)) from exc
        extra = {} if input.client_command_id is None else {"command_id": input.client_command_id}
        cmd = build(
            CreateEndpoint, me, project_id, name=input.name, owner=owner, spec=spec,
            replicas=input.replicas, scaling=scaling, rollout=rollout,
            open_to_public=input.open_to_public, **extra,
        )  # fmt: skip
        return await send(info, cmd, endpoint_id_for(cmd.name))

    @strawberry.mutation(
        description="Roll an endpoint to a new revision: what is left out stays as it is."
    )
    async def update_endpoint(
        self, info: Info[Context, Any], id: str, revision: RevisionInput, reason: str = ""
    ) -> EndpointOutcome:
        me = acting(info)
        record = await acting_on(info, id)
        base = await latest_revision(info, record)
        try:
            spec = revision_of(revision, base=base, limits=ctx_of(info).services.limits)
        except InputError as exc:
            raise invalid(str(exc)) from exc
        cmd = build(
            UpdateEndpoint, me, record.owner.project_id, endpoint_id=record.id, spec=spec,
            reason=reason,
        )  # fmt: skip
        return await send(info, cmd, record.id)

    @strawberry.mutation(description="Set the desired replica count (within min and max).")
    async def scale_endpoint(
        self, info: Info[Context, Any], id: str, replicas: int
    ) -> EndpointOutcome:
        me = acting(info)
        record = await acting_on(info, id)
        cmd = build(
            ScaleEndpoint, me, record.owner.project_id, endpoint_id=record.id, replicas=replicas
        )
        return await send(info, cmd, record.id)

    @strawberry.mutation(
        description="Change the bounds, rules, rollout bounds or openness; what is left out "
        "stays. A desired count outside new bounds is clamped into them."
    )
    async def modify_endpoint(
        self,
        info: Info[Context, Any],
        id: str,
        scaling: ScalingInput | None = None,
        open_to_public: bool | None = None,
    ) -> EndpointOutcome:
        me = acting(info)
        record = await acting_on(info, id)
        try:
            new_scaling = scaling_of(scaling, base=record.scaling)
            new_rollout = rollout_of(scaling, base=record.rollout)
        except InputError as exc:
            raise invalid(str(exc)) from exc
        cmd = build(
            ModifyEndpoint, me, record.owner.project_id, endpoint_id=record.id,
            scaling=None if scaling is None else new_scaling,
            rollout=None if scaling is None else new_rollout, open_to_public=open_to_public,
        )  # fmt: skip
        return await send(info, cmd, record.id)

    @strawberry.mutation(
        description="Retire every replica and end the endpoint; its name is free afterwards."
    )
    async def destroy_endpoint(
        self, info: Info[Context, Any], id: str, reason: str = ""
    ) -> EndpointOutcome:
        me = acting(info)
        record = await acting_on(info, id)
        cmd = build(
            DestroyEndpoint, me, record.owner.project_id, endpoint_id=record.id, reason=reason
        )
        return await send(info, cmd, record.id)

    @strawberry.mutation(
        description="A bearer token for the endpoint's URL; its text is answered this once "
        "(only the SHA-256 of its secret is kept)."
    )
    async def create_endpoint_token(
        self,
        info: Info[Context, Any],
        id: str,
        expires_in_s: int = 30 * DAY_S,
        note: str = "",
    ) -> IssuedEndpointToken:
        me = acting(info)
        record = await acting_on(info, id)
        # The token id is hex: the token text's '_' separators stay unambiguous.
        token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        cmd = build(
            CreateEndpointToken, me, record.owner.project_id, endpoint_id=record.id,
            token_id=token_id, secret_sha256=hashlib.sha256(secret.encode()).hexdigest(),
            expires_in_s=expires_in_s, note=note,
        )  # fmt: skip
        sent = await send(info, cmd, record.id)
        issued = {t.token_id: t for t in await ctx_of(info).views.endpoints.tokens(record.id)}
        expires = (
            issued[token_id].expires_at
            if token_id in issued
            else datetime.now(UTC) + timedelta(seconds=expires_in_s)
        )
        return IssuedEndpointToken(
            command_id=sent.command_id, status=sent.status, token_id=strawberry.ID(token_id),
            token=token_text(token_id, secret), expires_at=expires,
        )  # fmt: skip

    @strawberry.mutation(description="Refuse a token from now on, on every app proxy.")
    async def revoke_endpoint_token(
        self, info: Info[Context, Any], id: str, token_id: str, reason: str = ""
    ) -> EndpointOutcome:
        me = acting(info)
        record = await acting_on(info, id)
        cmd = build(
            RevokeEndpointToken, me, record.owner.project_id, endpoint_id=record.id,
            token_id=token_id, reason=reason,
        )  # fmt: skip
        return await send(info, cmd, record.id)
