"""Admin mutations on what is cluster-wide (superadmins only): resource policies, resource
groups and images. Send ``cmd.resource_policy.*``, ``cmd.resource_group.*``, ``cmd.image.*``."""

from __future__ import annotations

from typing import Any

import strawberry
from strawberry.types import Info

from commands import admin
from commands.authorisation import Principal, can_administer_cluster
from schemas.session import SessionType
from schemas.tenancy import (
    CREATED_SCHEDULING,
    PolicyKind,
    ScopeKind,
    image_id_for,
    policy_id_for,
)
from services.gateway.admin_api import inputs as parse
from services.gateway.admin_api.group_settings import group_scheduling, with_setting_arguments
from services.gateway.admin_api.inputs import (
    ImageLabelInput,
    KeypairPolicyInput,
    ServicePortInput,
    SlotLimitsInput,
    SlotsInput,
    StoragePolicyInput,
)
from services.gateway.admin_api.naming import project_anywhere
from services.gateway.admin_api.send import build, invalid, not_found, run
from services.gateway.admin_api.tenancy_types import AdminOutcome
from services.gateway.context import Context, ctx_of, forbidden, who
from services.gateway.core.inputs import InputError

Ctx = Info[Context, Any]


def _superadmin(info: Ctx, doing: str) -> Principal:
    me = who(info)
    if not can_administer_cluster(me):
        raise forbidden(info, f"only a superadmin {doing}")
    return me


async def _policy(
    info: Ctx,
    cls: type[admin.CreateResourcePolicy] | type[admin.ModifyResourcePolicy],
    kind: str,
    name: str,
    keypair: KeypairPolicyInput | None,
    storage: StoragePolicyInput | None,
) -> AdminOutcome:
    try:
        policy_kind = parse.choice("kind", kind, PolicyKind)
        keypair_limits, storage_limits = parse.policy_limits(policy_kind, keypair, storage)
    except InputError as exc:
        raise invalid(exc) from exc
    me = _superadmin(info, "sets resource policies")
    cmd = build(
        cls, me, kind=policy_kind, name=name, keypair=keypair_limits, storage=storage_limits
    )
    return await run(ctx_of(info), cmd, policy_id_for(policy_kind, name))


def _session_types(given: list[str] | None) -> tuple[SessionType, ...] | None:
    if given is None:
        return None
    return tuple(parse.choice("allowedSessionTypes", t, SessionType) for t in given)


async def _association(
    info: Ctx,
    cls: type[admin.AssociateResourceGroup] | type[admin.DisassociateResourceGroup],
    name: str,
    scope: str,
    scope_id: str,
) -> AdminOutcome:
    try:
        kind = parse.choice("scope", scope, ScopeKind)
    except InputError as exc:
        raise invalid(exc) from exc
    if kind is ScopeKind.USER:
        raise invalid(InputError("scope must be domain, project or keypair: users are not"))
    me = _superadmin(info, "changes who may use resource groups")
    if kind is ScopeKind.PROJECT:  # a person types a project's name (DOMAIN/NAME if shared)
        scope_id = project_anywhere(ctx_of(info), me, scope_id).id
    cmd = build(cls, me, name=name, scope=kind, scope_id=scope_id)
    return await run(ctx_of(info), cmd, name)


@strawberry.type
class ClusterMutation:
    # ---- resource policies ---------------------------------------------------------------

    @strawberry.mutation(description="keypair policies take `keypair`, others `storage`.")
    async def create_resource_policy(
        self,
        info: Ctx,
        kind: str,
        name: str,
        keypair: KeypairPolicyInput | None = None,
        storage: StoragePolicyInput | None = None,
    ) -> AdminOutcome:
        return await _policy(info, admin.CreateResourcePolicy, kind, name, keypair, storage)

    @strawberry.mutation(description="Replaces the limits; acts from the next admission on.")
    async def modify_resource_policy(
        self,
        info: Ctx,
        kind: str,
        name: str,
        keypair: KeypairPolicyInput | None = None,
        storage: StoragePolicyInput | None = None,
    ) -> AdminOutcome:
        return await _policy(info, admin.ModifyResourcePolicy, kind, name, keypair, storage)

    # ---- resource groups -----------------------------------------------------------------

    @strawberry.mutation(
        description="Scheduling settings left out take their defaults (docs/tenancy.md)."
    )
    @with_setting_arguments
    async def create_resource_group(
        self,
        info: Ctx,
        name: str,
        description: str = "",
        allowed_session_types: list[str] | None = None,
        **settings: Any,
    ) -> AdminOutcome:
        try:
            scheduling = group_scheduling(CREATED_SCHEDULING, **settings)
            types = _session_types(allowed_session_types) or tuple(SessionType)
        except InputError as exc:
            raise invalid(exc) from exc
        me = _superadmin(info, "creates resource groups")
        cmd = build(
            admin.CreateResourceGroup,
            me,
            name=name,
            description=description,
            allowed_session_types=types,
            scheduling=scheduling,
        )
        return await run(ctx_of(info), cmd, name)

    @strawberry.mutation(description="Arguments left out keep their value.")
    @with_setting_arguments
    async def modify_resource_group(
        self,
        info: Ctx,
        name: str,
        description: str | None = None,
        allowed_session_types: list[str] | None = None,
        **settings: Any,
    ) -> AdminOutcome:
        group = ctx_of(info).directory.groups.get(name)
        try:
            base = CREATED_SCHEDULING if group is None else group.scheduling
            scheduling = group_scheduling(base, **settings)
            types = _session_types(allowed_session_types)
        except InputError as exc:
            raise invalid(exc) from exc
        me = _superadmin(info, "changes resource groups")
        if group is None:
            raise not_found("resource group", name)
        cmd = build(
            admin.ModifyResourceGroup,
            me,
            name=name,
            description=group.description if description is None else description,
            allowed_session_types=group.allowed_session_types if types is None else types,
            scheduling=scheduling,
        )
        return await run(ctx_of(info), cmd, name)

    @strawberry.mutation(description="Let a domain, project or keypair use the group.")
    async def associate_resource_group(
        self, info: Ctx, name: str, scope: str, scope_id: strawberry.ID
    ) -> AdminOutcome:
        return await _association(info, admin.AssociateResourceGroup, name, scope, str(scope_id))

    @strawberry.mutation
    async def disassociate_resource_group(
        self, info: Ctx, name: str, scope: str, scope_id: strawberry.ID
    ) -> AdminOutcome:
        cls = admin.DisassociateResourceGroup
        return await _association(info, cls, name, scope, str(scope_id))

    # ---- images --------------------------------------------------------------------------

    @strawberry.mutation
    async def register_image(
        self,
        info: Ctx,
        name: str,
        min_resources: SlotsInput | None = None,
        max_resources: SlotLimitsInput | None = None,
        labels: list[ImageLabelInput] | None = None,
        service_ports: list[ServicePortInput] | None = None,
    ) -> AdminOutcome:
        """Its apps are ``servicePorts``, or else read from ``labels`` (see docs/tenancy.md)."""
        try:
            least = parse.slots("minResources", min_resources)
            most = parse.slot_limits("maxResources", max_resources)
        except InputError as exc:
            raise invalid(exc) from exc
        me = _superadmin(info, "registers images")
        apps = parse.image_apps(labels, service_ports)
        cmd = build(
            admin.RegisterImage, me, name=name, min_resources=least, max_resources=most, **apps
        )
        return await run(ctx_of(info), cmd, image_id_for(name))

    @strawberry.mutation(description="Change an image; what is left out stays as it is.")
    async def modify_image(
        self,
        info: Ctx,
        name: str,
        min_resources: SlotsInput | None = None,
        max_resources: SlotLimitsInput | None = None,
        labels: list[ImageLabelInput] | None = None,
        service_ports: list[ServicePortInput] | None = None,
    ) -> AdminOutcome:
        me = _superadmin(info, "modifies images")
        image = ctx_of(info).directory.images.get(image_id_for(name))
        if image is None:
            raise not_found("image", name)
        try:
            least = image.min_resources
            if min_resources is not None:
                least = parse.slots("minResources", min_resources)
            most = image.max_resources
            if max_resources is not None:
                most = parse.slot_limits("maxResources", max_resources)
        except InputError as exc:
            raise invalid(exc) from exc
        apps = parse.image_apps(labels, service_ports)
        cmd = build(
            admin.ModifyImage, me, name=name, min_resources=least, max_resources=most, **apps
        )
        return await run(ctx_of(info), cmd, image_id_for(name))

    @strawberry.mutation
    async def forget_image(self, info: Ctx, name: str, reason: str = "") -> AdminOutcome:
        me = _superadmin(info, "forgets images")
        cmd = build(admin.ForgetImage, me, name=name, reason=reason)
        return await run(ctx_of(info), cmd, image_id_for(name))
