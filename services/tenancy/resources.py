"""The tenancy service's decisions on where and from what sessions run: ``cmd.resource_group.*``
and ``cmd.image.*``, decided on the folded ``Directory`` (see ``domains``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from commands import admin as a
from commands.directory import Directory
from commands.tenancy import Image, ResourceGroup
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind, image_id_for
from services.tenancy.common import (
    Change,
    Decision,
    Who,
    acted,
    cluster_admin,
    exists,
    missing,
    working_copy,
)

# ---- resource groups ----------------------------------------------------------------------


def create_resource_group(
    cmd: a.CreateResourceGroup, d: Directory, who: Who, now: datetime
) -> Decision:
    if refused := cluster_admin(who, "create resource groups"):
        return refused
    if cmd.name in d.groups:
        return exists(d, AggregateType.RESOURCE_GROUP, cmd.name, cmd, f"resource group {cmd.name}")
    group = ResourceGroup.create(
        cmd.name, cmd.description, cmd.scheduling, cmd.allowed_session_types, now
    )
    return Change((group,), f"resource group {cmd.name} created")


def _group_change(
    cmd: Any, d: Directory, who: Who, act: Callable[[ResourceGroup], bool], done: str,
    already: str,
) -> Decision:  # fmt: skip
    if refused := cluster_admin(who, "change resource groups"):
        return refused
    group = d.groups.get(cmd.name)
    if group is None:
        return missing(f"resource group {cmd.name}")
    return acted(group, f"resource group {cmd.name}", act, done, already)


def modify_resource_group(
    cmd: a.ModifyResourceGroup, d: Directory, who: Who, now: datetime
) -> Decision:
    def act(x: ResourceGroup) -> bool:
        return x.modify(cmd.description, cmd.scheduling, cmd.allowed_session_types, now)

    return _group_change(cmd, d, who, act, "modified", "already had these settings")


def associate_resource_group(
    cmd: a.AssociateResourceGroup, d: Directory, who: Who, now: datetime
) -> Decision:
    targets: dict[ScopeKind, dict[str, Any]] = {
        ScopeKind.DOMAIN: d.domains,
        ScopeKind.PROJECT: d.projects,
        ScopeKind.KEYPAIR: d.keypairs,
    }
    known = targets.get(cmd.scope)
    if known is not None and cmd.scope_id not in known and cmd.name in d.groups:
        return missing(f"{cmd.scope.value} {cmd.scope_id}")
    scope = f"{cmd.scope.value} {d.scope_name(cmd.scope, cmd.scope_id)}"

    def act(x: ResourceGroup) -> bool:
        return x.associate(cmd.scope, cmd.scope_id, now)

    return _group_change(cmd, d, who, act, f"is open to {scope}", f"was already open to {scope}")


def disassociate_resource_group(
    cmd: a.DisassociateResourceGroup, d: Directory, who: Who, now: datetime
) -> Decision:
    scope = f"{cmd.scope.value} {d.scope_name(cmd.scope, cmd.scope_id)}"

    def act(x: ResourceGroup) -> bool:
        return x.disassociate(cmd.scope, cmd.scope_id, now)

    return _group_change(cmd, d, who, act, f"is closed to {scope}", f"was not open to {scope}")


def deactivate_resource_group(
    cmd: a.DeactivateResourceGroup, d: Directory, who: Who, now: datetime
) -> Decision:
    def act(x: ResourceGroup) -> bool:
        return x.deactivate(cmd.reason, now)

    return _group_change(cmd, d, who, act, "deactivated", "was already deactivated")


def reactivate_resource_group(
    cmd: a.ReactivateResourceGroup, d: Directory, who: Who, now: datetime
) -> Decision:
    return _group_change(
        cmd, d, who, lambda x: x.reactivate(now), "reactivated", "was already active"
    )


# ---- images -------------------------------------------------------------------------------


def register_image(cmd: a.RegisterImage, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "register images"):
        return refused
    image_id = image_id_for(cmd.name)
    known = working_copy(d.images.get(image_id))
    if known is None:
        image = Image.register(
            cmd.name, cmd.min_resources, cmd.max_resources, now, cmd.service_ports or ()
        )
        return Change((image,), f"image {cmd.name} registered")
    if not known.forgotten:
        return exists(d, AggregateType.IMAGE, image_id, cmd, f"image {cmd.name}")
    known.register_again(cmd.min_resources, cmd.max_resources, now, cmd.service_ports or ())
    return Change((known,), f"image {cmd.name} registered again")


def _image_change(
    cmd: Any, d: Directory, who: Who, act: Callable[[Image], bool], done: str, already: str
) -> Decision:
    if refused := cluster_admin(who, "change images"):
        return refused
    image = d.images.get(image_id_for(cmd.name))
    if image is None:
        return missing(f"image {cmd.name}")
    return acted(image, f"image {cmd.name}", act, done, already)


def modify_image(cmd: a.ModifyImage, d: Directory, who: Who, now: datetime) -> Decision:
    def act(x: Image) -> bool:
        return x.modify(cmd.min_resources, cmd.max_resources, now, cmd.service_ports)

    return _image_change(cmd, d, who, act, "modified", "already had these settings")


def forget_image(cmd: a.ForgetImage, d: Directory, who: Who, now: datetime) -> Decision:
    def act(x: Image) -> bool:
        return x.forget(cmd.reason, now)

    return _image_change(cmd, d, who, act, "forgotten", "was already forgotten")
