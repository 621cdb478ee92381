"""GraphQL for registries (superadmins): ``registries``, ``addRegistry``, ``modifyRegistry``,
``removeRegistry``, ``rescanRegistry``, ``setImagePullPolicy``, and ``rescanProgress`` (a
subscription). Sends ``cmd.registry.*`` and ``cmd.image.*``; seals passwords in
``jy-registry-secrets`` before a command names them; no answer ever holds one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import strawberry
from graphql import GraphQLError
from pydantic import ValidationError
from strawberry.types import Info

from commands import admin
from commands.authorisation import Principal, can_administer_cluster
from commands.messages import Command, explain
from commands.registry import Registry
from schemas.images import PullPolicy
from schemas.subjects import RESCAN_PROGRESS_PREFIX
from schemas.tenancy import image_id_for, project_id_for, registry_id_for
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.core.outcomes import command_answer, directory_holds
from services.gateway.core.types import CommandOutcome
from services.gateway.images.rescan import RescanResult, rescan

Ctx = Info[Context, Any]


@strawberry.type(description="A registry images are found in and pulled from. Its password or "
                 "token is never shown: `hasSecret` says whether one is set.")  # fmt: skip
class RegistryInfo:
    id: strawberry.ID
    name: str
    url: str
    kind: str
    username: str
    has_secret: bool
    projects: list[strawberry.ID] = strawberry.field(
        description="the projects whose sessions may use its images (empty: every project)"
    )
    verify_tls: bool
    has_ca: bool = strawberry.field(description="a CA certificate of the lab's own is set")
    removed: bool

    @classmethod
    def of(cls, registry: Registry) -> RegistryInfo:
        s = registry.settings
        return cls(
            id=strawberry.ID(registry.id), name=registry.name, url=s.url, kind=registry.kind,
            username=s.username, has_secret=bool(s.secret_id),
            projects=[strawberry.ID(p) for p in s.projects], verify_tls=s.verify_tls,
            has_ca=bool(s.ca_pem), removed=registry.removed,
        )  # fmt: skip


@strawberry.type(description="How far a rescan is.")
class RescanProgress:
    repositories_done: int
    repositories_total: int
    tags_done: int
    tags_total: int


def _superadmin(info: Ctx, doing: str) -> Principal:
    me = who(info)
    if not can_administer_cluster(me):
        raise forbidden(info, f"only a superadmin {doing}")
    return me


def _registry(info: Ctx, name: str) -> Registry:
    registry = ctx_of(info).directory.registries.get(registry_id_for(name))
    if registry is None:
        raise GraphQLError(f"registry {name!r} not found", extensions={"code": "not-found"})
    return registry


def _projects(info: Ctx, keys: list[str] | None) -> list[str]:
    """Project ids from ids or ``DOMAIN/NAME``; an unknown one is refused by name."""
    found = []
    projects = ctx_of(info).directory.projects
    for key in keys or []:
        domain, _, name = key.partition("/")
        project_id = project_id_for(domain, name) if name else key
        if project_id not in projects:
            raise GraphQLError(
                f"there is no project {key[:80]!r} (give its id or DOMAIN/NAME)",
                extensions={"code": "not-found"},
            )
        found.append(project_id)
    return found


async def _send(info: Ctx, cls: type[Command], me: Principal, **fields: Any) -> CommandOutcome:
    ctx = ctx_of(info)
    try:
        cmd = cls(actor=me.actor, tenant=me.tenant(), **fields)
    except ValidationError as exc:
        raise GraphQLError(explain(exc), extensions={"code": "invalid"}) from exc
    outcome = await ctx.commands.execute(cmd, timeout=ctx.settings.command_timeout_s)
    await directory_holds(ctx, outcome)
    return command_answer(outcome, cmd.command_id, None)


@strawberry.type
class RegistryQuery:
    @strawberry.field(description="Every registry (superadmins), removed ones included.")
    def registries(self, info: Ctx) -> list[RegistryInfo]:
        _superadmin(info, "lists registries")
        found = ctx_of(info).directory.registries.values()
        return sorted((RegistryInfo.of(r) for r in found), key=lambda r: r.name)


@strawberry.type
class RegistryMutation:
    @strawberry.mutation(description="Add a registry (`url`: http(s)://host[:port]). The "
                         "password or token is sealed at rest and never shown again.")  # fmt: skip
    async def add_registry(
        self, info: Ctx, name: str, url: str, username: str = "", password: str = "",
        projects: list[str] | None = None, verify_tls: bool = True, ca_pem: str = "",
    ) -> CommandOutcome:  # fmt: skip
        me = _superadmin(info, "adds registries")
        secret_id = await _seal(info, name, password)
        return await _send(
            info, admin.AddRegistry, me, name=name, url=url, username=username,
            secret_id=secret_id, projects=_projects(info, projects), verify_tls=verify_tls,
            ca_pem=ca_pem,
        )  # fmt: skip

    @strawberry.mutation(description="Change a registry; what is left out stays as it is "
                         "(a password of \"\" removes it; none keeps it).")  # fmt: skip
    async def modify_registry(
        self, info: Ctx, name: str, url: str | None = None, username: str | None = None,
        password: str | None = None, projects: list[str] | None = None,
        verify_tls: bool | None = None, ca_pem: str | None = None,
    ) -> CommandOutcome:  # fmt: skip
        me = _superadmin(info, "changes registries")
        s = _registry(info, name).settings
        secret_id = s.secret_id if password is None else await _seal(info, name, password)
        return await _send(
            info, admin.ModifyRegistry, me, name=name, url=s.url if url is None else url,
            username=s.username if username is None else username, secret_id=secret_id,
            projects=s.projects if projects is None else _projects(info, projects),
            verify_tls=s.verify_tls if verify_tls is None else verify_tls,
            ca_pem=s.ca_pem if ca_pem is None else ca_pem,
        )  # fmt: skip

    @strawberry.mutation(description="Remove a registry: no rescan or pull uses it again.")
    async def remove_registry(self, info: Ctx, name: str, reason: str = "") -> CommandOutcome:
        me = _superadmin(info, "removes registries")
        answer = await _send(info, admin.RemoveRegistry, me, name=name, reason=reason)
        await ctx_of(info).services.registry_secrets.forget(registry_id_for(name))
        return answer

    @strawberry.mutation(description="List the registry's repositories and tags and record "
                         "each image found (new, moved or changed) as events; "
                         "`rescanProgress` follows it.")  # fmt: skip
    async def rescan_registry(
        self, info: Ctx, name: str, repositories: list[str] | None = None
    ) -> RescanResult:
        me = _superadmin(info, "rescans registries")
        return await rescan(ctx_of(info), me, _registry(info, name), repositories)

    @strawberry.mutation(description="When nodes pull an image: if-not-present, always or "
                         "digest; none: its resource group's policy.")  # fmt: skip
    async def set_image_pull_policy(
        self, info: Ctx, name: str, policy: str | None = None
    ) -> CommandOutcome:
        me = _superadmin(info, "changes images")
        if image_id_for(name) not in ctx_of(info).directory.images:
            raise GraphQLError(f"image {name[:256]!r} not found", extensions={"code": "not-found"})
        try:
            chosen = None if policy is None else PullPolicy(policy)
        except ValueError:
            choices = ", ".join(p.value for p in PullPolicy)
            raise GraphQLError(
                f"policy must be one of {choices}", extensions={"code": "invalid"}
            ) from None
        return await _send(info, admin.SetImagePullPolicy, me, name=name, policy=chosen)


async def _seal(info: Ctx, name: str, password: str) -> str:
    """The secret id of ``password`` sealed for the registry ("" for none)."""
    if not password:
        return ""
    if len(password) > 8192:
        raise GraphQLError(
            "a password or token is at most 8192 characters", extensions={"code": "invalid"}
        )
    return await ctx_of(info).services.registry_secrets.store(registry_id_for(name), password)


@strawberry.type
class RegistrySubscription:
    @strawberry.subscription(description="A rescan's progress as it goes (superadmins).")
    async def rescan_progress(self, info: Ctx, name: str) -> AsyncGenerator[RescanProgress, None]:
        _superadmin(info, "follows rescans")
        registry_id = registry_id_for(name)
        sub = await ctx_of(info).services.bus.nc.subscribe(
            f"{RESCAN_PROGRESS_PREFIX}.{registry_id}"
        )
        try:
            async for msg in sub.messages:
                seen = json.loads(msg.data)
                yield RescanProgress(**seen)
        finally:
            await sub.unsubscribe()
