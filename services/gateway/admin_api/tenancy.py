"""Admin mutations on domains, projects and users: authorise against the directory, send
``cmd.domain.*``, ``cmd.project.*``, ``cmd.user.*``. Writes the people and credentials buckets
(a user's sealed email, their password hash, their first keypair's secret) around
``CreateUser``. Projects are named by name or id, users by email or id (``naming``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Annotated, Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands import admin
from commands.authorisation import (
    can_administer_cluster,
    can_administer_domain,
    can_grant_role,
)
from schemas.fair_share import SHARE_MOST
from schemas.tenancy import Role, SlotLimits, email_digest, project_id_for, user_id_for
from services.gateway.admin_api import inputs as parse
from services.gateway.admin_api.inputs import SlotLimitsInput
from services.gateway.admin_api.naming import project_of_user, projects_in, user_named
from services.gateway.admin_api.send import (
    answer,
    build,
    execute,
    invalid,
    may_administer_user,
    not_found,
    run,
    visible_project,
    visible_user,
)
from services.gateway.admin_api.tenancy_types import AdminOutcome
from services.gateway.auth.vault import new_access_key, new_secret_key
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.core.inputs import InputError

Ctx = Info[Context, Any]
log = logging.getLogger(__name__)


SHARE_ARGUMENT = (
    "its share among its siblings for fair share, 1 to 10000 (docs/scheduling.md); left out: "
    "1 at creation, kept on a change"
)


def _share(given: int | None) -> dict[str, int]:
    """A creation's share, when given (left out: the command's default, 1)."""
    return {} if given is None else {"fair_share": _in_bounds(given)}


def _checked(given: int | None) -> int | None:
    """A change's share: None keeps the one held."""
    return None if given is None else _in_bounds(given)


def _in_bounds(given: int) -> int:
    if not 1 <= given <= SHARE_MOST:
        raise invalid(InputError(f"fairShare must be 1 to {SHARE_MOST}, got {given}"))
    return given


def _limits(field: str, given: SlotLimitsInput | None) -> SlotLimits:
    try:
        return parse.slot_limits(field, given)
    except InputError as exc:
        raise invalid(exc) from exc


@strawberry.type
class TenancyMutation:
    # ---- domains (cluster-wide: superadmins) ---------------------------------------------

    @strawberry.mutation
    async def create_domain(
        self,
        info: Ctx,
        name: str,
        description: str = "",
        total_resource_slots: SlotLimitsInput | None = None,
        fair_share: Annotated[int | None, strawberry.argument(description=SHARE_ARGUMENT)] = None,
    ) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        slots = _limits("totalResourceSlots", total_resource_slots)
        if not can_administer_cluster(me):
            raise forbidden(info, "only a superadmin creates domains")
        cmd = build(
            admin.CreateDomain, me, name=name, description=description, total_resource_slots=slots,
            **_share(fair_share),
        )  # fmt: skip
        return await run(ctx, cmd, name)

    @strawberry.mutation(description="Arguments left out keep their value; {} is unlimited.")
    async def modify_domain(
        self,
        info: Ctx,
        name: str,
        description: str | None = None,
        total_resource_slots: SlotLimitsInput | None = None,
        fair_share: Annotated[int | None, strawberry.argument(description=SHARE_ARGUMENT)] = None,
    ) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        if not can_administer_cluster(me):
            raise forbidden(info, "only a superadmin changes domains")
        domain = ctx.directory.domains.get(name)
        if domain is None:
            raise not_found("domain", name)
        slots = (
            domain.total_resource_slots
            if total_resource_slots is None
            else _limits("totalResourceSlots", total_resource_slots)
        )
        cmd = build(
            admin.ModifyDomain,
            me,
            name=name,
            description=domain.description if description is None else description,
            total_resource_slots=slots,
            fair_share=_checked(fair_share),
        )
        return await run(ctx, cmd, name)

    @strawberry.mutation
    async def deactivate_domain(self, info: Ctx, name: str, reason: str = "") -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        if not can_administer_cluster(me):
            raise forbidden(info, "only a superadmin deactivates domains")
        return await run(ctx, build(admin.DeactivateDomain, me, name=name, reason=reason), name)

    # ---- projects ------------------------------------------------------------------------

    @strawberry.mutation
    async def create_project(
        self,
        info: Ctx,
        domain: str,
        name: str,
        description: str = "",
        total_resource_slots: SlotLimitsInput | None = None,
        policy: str = "default",
        fair_share: Annotated[int | None, strawberry.argument(description=SHARE_ARGUMENT)] = None,
    ) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        slots = _limits("totalResourceSlots", total_resource_slots)
        if not can_administer_domain(me, domain):
            raise forbidden(info, f"you cannot create projects in domain {domain!r}")
        cmd = build(
            admin.CreateProject,
            me,
            domain=domain,
            name=name,
            description=description,
            total_resource_slots=slots,
            policy=policy,
            **_share(fair_share),
        )
        return await run(ctx, cmd, project_id_for(domain, name))

    @strawberry.mutation(description="Arguments left out keep their value; {} is unlimited.")
    async def modify_project(
        self,
        info: Ctx,
        id: strawberry.ID,
        description: str | None = None,
        total_resource_slots: SlotLimitsInput | None = None,
        policy: str | None = None,
        fair_share: Annotated[int | None, strawberry.argument(description=SHARE_ARGUMENT)] = None,
    ) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        project = visible_project(ctx, me, str(id))
        if not can_administer_domain(me, project.domain):
            raise forbidden(info, f"you cannot change projects of domain {project.domain!r}")
        slots = (
            project.total_resource_slots
            if total_resource_slots is None
            else _limits("totalResourceSlots", total_resource_slots)
        )
        cmd = build(
            admin.ModifyProject,
            me,
            project_id=str(id),
            description=project.description if description is None else description,
            total_resource_slots=slots,
            policy=project.policy if policy is None else policy,
            fair_share=_checked(fair_share),
        )
        return await run(ctx, cmd, str(id))

    # ---- users ---------------------------------------------------------------------------

    @strawberry.mutation(
        description="A person, with a default keypair to own sessions (its secret is not shown: "
        "they sign in with the password; createKeypair shows one). Their email is kept sealed "
        "with their own key. projects: names (or ids) of projects of the domain."
    )
    async def create_user(
        self,
        info: Ctx,
        email: str,
        password: str,
        domain: str,
        role: str = "user",
        projects: list[strawberry.ID] | None = None,
        policy: str = "default",
        keypair_policy: str = "default",
        fair_share: Annotated[int | None, strawberry.argument(description=SHARE_ARGUMENT)] = None,
    ) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        try:
            address = parse.email(email)
            secret = parse.password(password)
            granted = parse.choice("role", role, Role)
        except InputError as exc:
            raise invalid(exc) from exc
        if not can_administer_domain(me, domain):
            raise forbidden(info, f"you cannot create users in domain {domain!r}")
        if not can_grant_role(me, granted):
            raise forbidden(info, f"you cannot grant the role {granted.value}")
        if domain not in ctx.directory.domains:
            raise not_found("domain", domain)
        project_ids = projects_in(ctx, me, domain, [str(p) for p in projects or []])
        digest = email_digest(address, ctx.services.email_key)
        user_id = user_id_for(digest)
        if user_id in ctx.directory.users:
            # Checked before anything is stored: the create-once guard would refuse it anyway.
            raise GraphQLError(
                "a user with this email already exists", extensions={"code": "conflict"}
            )
        access_key, secret_key = new_access_key(), new_secret_key()
        fields: dict[str, Any] = {
            "domain": domain, "role": granted, "email_digest": digest, "policy": policy,
            "projects": project_ids, **_share(fair_share),
        }  # fmt: skip
        first = {"access_key": access_key, "secret_key_id": "-", "policy": keypair_policy}
        build(admin.CreateUser, me, email_sealed="-", keypair=first, **fields)  # bad input
        first["secret_key_id"] = await ctx.services.vault.store_secret(access_key, secret_key)
        sealed = await ctx.services.people.seal(user_id, address)
        cmd = build(admin.CreateUser, me, email_sealed=sealed, keypair=first, **fields)
        outcome = await execute(ctx, cmd)
        # The password is set only once the user exists: one set before a refused create
        # (the same email, a race past the check above) would replace that person's own.
        if outcome is None:
            _later(_password_once_created(ctx, cmd.command_id, user_id, secret))
        elif outcome.accepted:
            await ctx.services.passwords.set_password(user_id, secret)
        else:
            await ctx.services.vault.delete_secret(access_key)
        return answer(outcome, cmd, user_id)

    @strawberry.mutation(description="Arguments left out keep their value.")
    async def modify_user(
        self,
        info: Ctx,
        id: strawberry.ID,
        role: str | None = None,
        policy: str | None = None,
        fair_share: Annotated[int | None, strawberry.argument(description=SHARE_ARGUMENT)] = None,
    ) -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        try:
            granted = None if role is None else parse.choice("role", role, Role)
        except InputError as exc:
            raise invalid(exc) from exc
        user = visible_user(ctx, me, str(id))
        if not may_administer_user(me, user):
            raise forbidden(info, "you cannot change this user")
        if granted is not None and not can_grant_role(me, granted):
            raise forbidden(info, f"you cannot grant the role {granted.value}")
        cmd = build(
            admin.ModifyUser,
            me,
            user_id=str(id),
            role=user.role if granted is None else granted,
            policy=user.policy if policy is None else policy,
            fair_share=_checked(fair_share),
        )
        return await run(ctx, cmd, str(id))

    @strawberry.mutation(description="userId: an id or an email; projectId: a name or an id.")
    async def add_user_to_project(
        self, info: Ctx, user_id: strawberry.ID, project_id: strawberry.ID
    ) -> AdminOutcome:
        return await _membership(info, admin.AddUserToProject, str(user_id), str(project_id))

    @strawberry.mutation(description="userId: an id or an email; projectId: a name or an id.")
    async def remove_user_from_project(
        self, info: Ctx, user_id: strawberry.ID, project_id: strawberry.ID
    ) -> AdminOutcome:
        return await _membership(info, admin.RemoveUserFromProject, str(user_id), str(project_id))

    @strawberry.mutation
    async def deactivate_user(self, info: Ctx, id: strawberry.ID, reason: str = "") -> AdminOutcome:
        me, ctx = who(info), ctx_of(info)
        user = visible_user(ctx, me, str(id))
        if not may_administer_user(me, user):
            raise forbidden(info, "you cannot deactivate this user")
        cmd = build(admin.DeactivateUser, me, user_id=str(id), reason=reason)
        return await run(ctx, cmd, str(id))


async def _membership(
    info: Ctx,
    kind: type[admin.AddUserToProject] | type[admin.RemoveUserFromProject],
    user_id: str,
    project_id: str,
) -> AdminOutcome:
    me, ctx = who(info), ctx_of(info)
    user = user_named(ctx, me, user_id)
    project = project_of_user(ctx, me, user, project_id)
    if not may_administer_user(me, user):
        raise forbidden(info, "you cannot change this user's projects")
    return await run(ctx, build(kind, me, user_id=user.id, project_id=project.id), user.id)


# Background work must stay referenced until done, or the loop may drop it.
_PENDING: set[asyncio.Task[None]] = set()
PASSWORD_WAIT_S = 120.0


def _later(work: Coroutine[Any, Any, None]) -> None:
    task = asyncio.create_task(work)
    _PENDING.add(task)
    task.add_done_callback(_PENDING.discard)


async def _password_once_created(ctx: Context, command_id: str, user_id: str, secret: str) -> None:
    """A create not decided in the request's time: set the password if it is accepted later."""
    try:
        outcome = await ctx.commands.wait_outcome(command_id, PASSWORD_WAIT_S)
        if outcome is not None and outcome.accepted:
            await ctx.services.passwords.set_password(user_id, secret)
        elif outcome is None:
            log.warning("user %s: create still undecided; no password was set", user_id[:8])
    except Exception:
        log.exception("user %s: setting the password failed", user_id[:8])
