"""Admin queries: tenancy objects from the gateway's directory (the fold of ``ev.domain.*``,
``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``, ``ev.resource_policy.*``,
``ev.resource_group.*``, ``ev.image.*``) and quota use from the fold of ``ev.quota.*``. Reads
the people bucket to unseal emails. Writes nothing.

Everything another tenant owns answers as if it did not exist: null or left out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from commands.authorisation import Principal, can_administer_cluster, can_read_domain
from commands.tenancy import User
from schemas.tenancy import ScopeKind
from services.gateway.admin_api.inputs import choice
from services.gateway.admin_api.resource_types import (
    ImageInfo,
    Quota,
    ResourceGroupInfo,
    ResourcePolicyInfo,
    quota_slots,
)
from services.gateway.admin_api.tenancy_types import (
    DomainInfo,
    KeypairInfo,
    ProjectInfo,
    UserInfo,
    Viewer,
)
from services.gateway.context import Context, ctx_of, who
from services.gateway.core.history import AsOf, directory_of
from services.gateway.core.inputs import InputError
from services.gateway.core.visibility import (
    own_scopes,
    policies_in_use,
    sees_email,
    sees_keypair,
    sees_project,
    sees_scope,
    sees_user,
)

log = logging.getLogger(__name__)
QUOTA_SYNC_S = 2.0
"""How long ``myQuota`` waits for the quota fold to reach the log's end before it answers."""

DEFAULT_PAGE = 100
MAX_PAGE = 1000
T = TypeVar("T")


def page(items: list[T], first: int, offset: int, *, key: Callable[[T], Any]) -> list[T]:
    """One page of a list, in a stable order: every admin list is bounded."""
    if not 1 <= first <= MAX_PAGE:
        raise GraphQLError(
            f"first must be 1 to {MAX_PAGE}, got {first}", extensions={"code": "invalid"}
        )
    if offset < 0:
        raise GraphQLError(
            f"offset must not be negative, got {offset}", extensions={"code": "invalid"}
        )
    return sorted(items, key=key)[offset : offset + first]


def quota_of(ctx: Context, kind: ScopeKind, scope_id: str) -> Quota:
    directory = ctx.directory
    limits, unspecified = directory.scope_limits(kind, scope_id)
    quotas = ctx.services.quotas
    used, sessions, pending = quotas.use(kind, scope_id)
    holding, waiting = quotas.counts(kind, scope_id)
    held, asked = quotas.held(kind, scope_id), quotas.waiting(kind, scope_id)
    # Session counts are bounded by the keypair policy only.
    policy = directory.keypair_limits(scope_id) if kind is ScopeKind.KEYPAIR else None
    return Quota(
        scope=kind.value,
        scope_id=strawberry.ID(scope_id),
        name=directory.scope_name(kind, scope_id),
        slots=quota_slots(limits, unspecified, used, held, asked),
        holding=holding,
        waiting=waiting,
        sessions=sessions,
        max_sessions=policy.max_concurrent_sessions if policy is not None else None,
        pending=pending,
        max_pending=policy.max_pending_sessions if policy is not None else None,
    )


async def user_info(ctx: Context, me: Principal, user: User) -> UserInfo:
    email = None
    if sees_email(me, user):
        email = await ctx.services.people.unseal(str(user.id), user.email_sealed)
    return UserInfo.of(user, email)


@strawberry.type
class AdminQuery:
    @strawberry.field(description="The caller, as this request authenticated them.")
    def viewer(self, info: Info[Context, Any]) -> Viewer:
        me = who(info)
        return Viewer(
            user_id=strawberry.ID(me.user_id),
            role=me.role.value,
            domain=me.domain,
            projects=sorted(me.projects),
            access_key=me.access_key,
        )

    @strawberry.field(description="Domains the caller may read (superadmins: all).")
    async def domains(
        self,
        info: Info[Context, Any],
        first: int = DEFAULT_PAGE,
        offset: int = 0,
        as_of: AsOf | None = None,
    ) -> list[DomainInfo]:
        me = who(info)
        found = (await directory_of(info, as_of)).domains.values()
        mine = [DomainInfo.of(d) for d in found if can_read_domain(me, d.name)]
        return page(mine, first, offset, key=lambda d: d.name)

    @strawberry.field
    def domain(self, info: Info[Context, Any], name: str) -> DomainInfo | None:
        me = who(info)
        found = ctx_of(info).directory.domains.get(name)
        if found is None or not can_read_domain(me, name):
            return None
        return DomainInfo.of(found)

    @strawberry.field(description="Projects the caller may read, of one domain or all.")
    async def projects(
        self,
        info: Info[Context, Any],
        domain: str | None = None,
        first: int = DEFAULT_PAGE,
        offset: int = 0,
        as_of: AsOf | None = None,
    ) -> list[ProjectInfo]:
        me = who(info)
        found = (await directory_of(info, as_of)).projects.values()
        mine = [
            ProjectInfo.of(p)
            for p in found
            if (domain is None or p.domain == domain) and sees_project(me, p)
        ]
        return page(mine, first, offset, key=lambda p: str(p.id))

    @strawberry.field(description="Users the caller may read, of one domain or all.")
    async def users(
        self,
        info: Info[Context, Any],
        domain: str | None = None,
        first: int = DEFAULT_PAGE,
        offset: int = 0,
        as_of: AsOf | None = None,
    ) -> list[UserInfo]:
        me, ctx = who(info), ctx_of(info)
        found = [
            u
            for u in (await directory_of(info, as_of)).users.values()
            if (domain is None or u.domain == domain) and sees_user(me, u)
        ]
        chosen = page(found, first, offset, key=lambda u: str(u.id))
        return [await user_info(ctx, me, u) for u in chosen]

    @strawberry.field
    async def user(
        self, info: Info[Context, Any], id: strawberry.ID, as_of: AsOf | None = None
    ) -> UserInfo | None:
        me, ctx = who(info), ctx_of(info)
        found = (await directory_of(info, as_of)).users.get(str(id))
        if found is None or not sees_user(me, found):
            return None
        return await user_info(ctx, me, found)

    @strawberry.field(description="A user's keypairs (never their secret keys).")
    async def keypairs(
        self,
        info: Info[Context, Any],
        user_id: strawberry.ID | None = None,
        first: int = DEFAULT_PAGE,
        offset: int = 0,
        as_of: AsOf | None = None,
    ) -> list[KeypairInfo]:
        me, directory = who(info), await directory_of(info, as_of)
        owner = str(user_id) if user_id is not None else me.user_id
        user = directory.users.get(owner)
        if user is None or not sees_user(me, user):
            return []
        mine = [
            KeypairInfo.of(k, user.default_access_key)
            for k in directory.keypairs.values()
            if k.user_id == owner and sees_keypair(me, k)
        ]
        return page(mine, first, offset, key=lambda k: k.access_key)

    @strawberry.field(description="All policies for superadmins; others: those that bind them.")
    async def resource_policies(
        self,
        info: Info[Context, Any],
        first: int = DEFAULT_PAGE,
        offset: int = 0,
        as_of: AsOf | None = None,
    ) -> list[ResourcePolicyInfo]:
        me, directory = who(info), await directory_of(info, as_of)
        if can_administer_cluster(me):
            found = [ResourcePolicyInfo.of(p) for p in directory.policies.values()]
        else:
            ids = policies_in_use(directory, me)
            found = [ResourcePolicyInfo.of(p) for i, p in directory.policies.items() if i in ids]
        return page(found, first, offset, key=lambda p: (p.kind, p.name))

    @strawberry.field(description="All groups for superadmins; others: the groups they may use.")
    async def resource_groups(
        self,
        info: Info[Context, Any],
        first: int = DEFAULT_PAGE,
        offset: int = 0,
        as_of: AsOf | None = None,
    ) -> list[ResourceGroupInfo]:
        me, directory = who(info), await directory_of(info, as_of)
        if can_administer_cluster(me):
            every = [ResourceGroupInfo.of(g, members=True) for g in directory.groups.values()]
            return page(every, first, offset, key=lambda g: g.name)
        names: set[str] = set()
        for project in me.projects or {""}:
            names |= directory.allowed_groups(me.domain, project, me.access_key or "")
        usable = [
            ResourceGroupInfo.of(directory.groups[n], members=False)
            for n in sorted(names)
            if n in directory.groups
        ]
        return page(usable, first, offset, key=lambda g: g.name)

    @strawberry.field(description="Registered images (not forgotten).")
    def images(
        self, info: Info[Context, Any], first: int = DEFAULT_PAGE, offset: int = 0
    ) -> list[ImageInfo]:
        who(info)
        directory = ctx_of(info).directory
        registries = {r.id: r.name for r in directory.registries.values()}
        live = [
            ImageInfo.of(i, registries.get(i.registry))
            for i in directory.images.values()
            if not i.forgotten
        ]
        return page(live, first, offset, key=lambda i: i.name)

    @strawberry.field(description="What one scope may hold and holds now; null if not visible.")
    def quota(self, info: Info[Context, Any], scope: str, id: strawberry.ID) -> Quota | None:
        me, ctx = who(info), ctx_of(info)
        try:
            kind = choice("scope", scope, ScopeKind)
        except InputError as exc:
            raise GraphQLError(str(exc), extensions={"code": "invalid"}) from exc
        if not sees_scope(ctx.directory, me, kind, str(id)):
            return None
        return quota_of(ctx, kind, str(id))

    @strawberry.field(
        description="The caller's keypair, user, project and domain quotas, as of the log's end "
        "when asked (a session seen ended is seen given back)."
    )
    async def my_quota(self, info: Info[Context, Any]) -> list[Quota]:
        me, ctx = who(info), ctx_of(info)
        try:
            await ctx.services.quotas.sync(QUOTA_SYNC_S)
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error) as exc:
            log.info("myQuota answered without waiting for the log's end: %r", exc)
        return [quota_of(ctx, kind, scope_id) for kind, scope_id in own_scopes(me)]
