"""How an admin mutation sends its command: build it from the principal (refusing bad input
before anything is sent), execute it on ``cmd.<aggregate>.<verb>``, wait for ``out.<id>``, and
turn the outcome into an answer or a GraphQL error carrying the rejection's code."""

from __future__ import annotations

from typing import Any, TypeVar

import strawberry
from graphql import GraphQLError
from pydantic import ValidationError

from commands.authorisation import Principal, can_administer_domain
from commands.messages import Command, explain
from commands.outcome import Outcome
from commands.tenancy import Keypair, Project, User
from schemas.tenancy import Role
from services.gateway.admin_api.tenancy_types import AdminOutcome
from services.gateway.context import Context
from services.gateway.core.inputs import InputError
from services.gateway.core.outcomes import directory_holds
from services.gateway.core.types import OutcomeStatus
from services.gateway.core.visibility import sees_keypair, sees_project, sees_user

C = TypeVar("C", bound=Command)


def invalid(exc: InputError | ValidationError) -> GraphQLError:
    message = explain(exc) if isinstance(exc, ValidationError) else str(exc)
    return GraphQLError(message, extensions={"code": "invalid"})


def not_found(what: str, key: str) -> GraphQLError:
    """What a caller gets for an object that does not exist, or that is another tenant's."""
    return GraphQLError(f"{what} {key!r} not found", extensions={"code": "not-found"})


def build(cls: type[C], me: Principal, **fields: Any) -> C:
    """The command on behalf of ``me``; bad input is an ``invalid`` error and nothing is sent."""
    try:
        return cls(actor=me.actor, tenant=me.tenant(), **fields)
    except ValidationError as exc:
        raise invalid(exc) from exc


async def execute(ctx: Context, cmd: Command) -> Outcome | None:
    outcome = await ctx.commands.execute(cmd, timeout=ctx.settings.command_timeout_s)
    await directory_holds(ctx, outcome)
    return outcome


def answer(outcome: Outcome | None, cmd: Command, object_id: str | None) -> AdminOutcome:
    """Accepted or pending: the answer; rejected: a GraphQL error with the outcome's code."""
    found = strawberry.ID(object_id) if object_id is not None else None
    command_id = strawberry.ID(cmd.command_id)
    if outcome is None:
        return AdminOutcome(
            command_id=command_id,
            status=OutcomeStatus.PENDING,
            message="not decided yet: ask commandOutcome(id) later",
            id=found,
        )
    if not outcome.accepted:
        raise rejected(outcome)
    return AdminOutcome(
        command_id=command_id, status=OutcomeStatus.ACCEPTED, message=outcome.message, id=found
    )


def rejected(outcome: Outcome) -> GraphQLError:
    return GraphQLError(
        outcome.message, extensions={"code": outcome.code, "commandId": outcome.command_id}
    )


async def run(ctx: Context, cmd: Command, object_id: str | None) -> AdminOutcome:
    return answer(await execute(ctx, cmd), cmd, object_id)


# ---- the objects a mutation acts on ---------------------------------------------------------


def visible_project(ctx: Context, me: Principal, project_id: str) -> Project:
    project = ctx.directory.projects.get(project_id)
    if project is None or not sees_project(me, project):
        raise not_found("project", project_id)
    return project


def visible_user(ctx: Context, me: Principal, user_id: str) -> User:
    user = ctx.directory.users.get(user_id)
    if user is None or not sees_user(me, user):
        raise not_found("user", user_id)
    return user


def visible_keypair(ctx: Context, me: Principal, access_key: str) -> Keypair:
    keypair = ctx.directory.keypairs.get(access_key)
    if keypair is None or not sees_keypair(me, keypair):
        raise not_found("keypair", access_key)
    return keypair


def may_administer_user(me: Principal, user: User) -> bool:
    """A domain admin administers their domain's people, but not a superadmin among them."""
    if user.role is Role.SUPERADMIN and not me.is_superadmin:
        return False
    return can_administer_domain(me, user.domain)
