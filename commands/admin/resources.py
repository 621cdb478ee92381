"""Admin commands on cluster resources: resource policies (``cmd.resource_policy.*``),
resource groups (``cmd.resource_group.*``) and images (``cmd.image.*``)."""

from __future__ import annotations

from typing import Any, Self

from pydantic import field_validator, model_validator

from commands.admin.fields import Description, ImageLabels, ImageName, Name, Reason
from commands.messages import Command
from schemas.ids import Token
from schemas.resources import ResourceSlots
from schemas.service_ports import (
    ServicePort,
    ServicePortError,
    check_service_ports,
    service_ports_of,
)
from schemas.session import SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import (
    CREATED_SCHEDULING,
    GroupScheduling,
    KeypairPolicyLimits,
    PolicyKind,
    ScopeKind,
    SlotLimits,
    StoragePolicyLimits,
)

RP, RG, IM = AggregateType.RESOURCE_POLICY, AggregateType.RESOURCE_GROUP, AggregateType.IMAGE

# ---- resource policies --------------------------------------------------------------------


class CreateResourcePolicy(Command):
    """A keypair policy sets ``keypair``; a user or project policy sets ``storage``."""

    aggregate_type, verb = RP, "create"
    kind: PolicyKind
    name: Name
    keypair: KeypairPolicyLimits | None = None
    storage: StoragePolicyLimits | None = None


class ModifyResourcePolicy(Command):
    aggregate_type, verb = RP, "modify"
    kind: PolicyKind
    name: Name
    keypair: KeypairPolicyLimits | None = None
    storage: StoragePolicyLimits | None = None


# ---- resource groups ----------------------------------------------------------------------


class CreateResourceGroup(Command):
    """Settings left out of ``scheduling`` are ``CREATED_SCHEDULING``'s (a new group disperses
    unless told otherwise, as groups always have)."""

    aggregate_type, verb = RG, "create"
    name: Name
    description: Description = ""
    allowed_session_types: tuple[SessionType, ...] = tuple(SessionType)
    scheduling: GroupScheduling = CREATED_SCHEDULING

    @field_validator("scheduling", mode="before")
    @classmethod
    def _left_out_as_created(cls, given: Any) -> Any:
        # GroupScheduling's own defaults are what groups stored before a setting existed mean
        # (they concentrated); a new group named in part takes a new group's.
        if isinstance(given, dict):
            return {**CREATED_SCHEDULING.model_dump(), **given}
        return given


class ModifyResourceGroup(Command):
    """The group's settings, whole: ``scheduling`` replaces the group's."""

    aggregate_type, verb = RG, "modify"
    name: Name
    description: Description
    allowed_session_types: tuple[SessionType, ...]
    scheduling: GroupScheduling


class AssociateResourceGroup(Command):
    """Let a domain, project or keypair use the group (``scope`` is not ``user``)."""

    aggregate_type, verb = RG, "associate"
    name: Name
    scope: ScopeKind
    scope_id: Token


class DisassociateResourceGroup(Command):
    aggregate_type, verb = RG, "disassociate"
    name: Name
    scope: ScopeKind
    scope_id: Token


class DeactivateResourceGroup(Command):
    aggregate_type, verb = RG, "deactivate"
    name: Name
    reason: Reason = ""


class ReactivateResourceGroup(Command):
    aggregate_type, verb = RG, "reactivate"
    name: Name


# ---- images -------------------------------------------------------------------------------


class _ImageApps(Command):
    """``service_ports`` as given, or else parsed from ``labels`` (the image's labels, e.g. from
    ``docker image inspect``: ``schemas.service_ports`` reads its two label formats). A bad
    label refuses the command with the parser's message, naming the entry."""

    labels: ImageLabels = {}
    service_ports: tuple[ServicePort, ...] | None = None

    @model_validator(mode="after")
    def _ports_from_labels(self) -> Self:
        try:
            if self.service_ports is not None:
                check_service_ports(self.service_ports)
            elif self.labels:
                # Frozen: set once here, while the command is being made.
                object.__setattr__(self, "service_ports", service_ports_of(self.labels))
        except ServicePortError as exc:
            raise ValueError(str(exc)) from None
        return self


class RegisterImage(_ImageApps):
    """The image's id is ``image_id_for(name)``. No ports and no labels: it serves no apps."""

    aggregate_type, verb = IM, "register"
    name: ImageName
    min_resources: ResourceSlots = ResourceSlots()
    max_resources: SlotLimits = SlotLimits()


class ModifyImage(_ImageApps):
    """No ports and no labels keep the apps it has; ``service_ports=[]`` removes them."""

    aggregate_type, verb = IM, "modify"
    name: ImageName
    min_resources: ResourceSlots
    max_resources: SlotLimits


class ForgetImage(Command):
    aggregate_type, verb = IM, "forget"
    name: ImageName
    reason: Reason = ""
