"""Admin commands on the tenancy aggregates (``cmd.domain.*``, ``cmd.project.*``,
``cmd.user.*``, ``cmd.keypair.*``, ``cmd.resource_policy.*``, ``cmd.resource_group.*``,
``cmd.image.*``), decided by the gateway's admin module.

They carry no secret and no personal data in clear: the gateway stores a keypair's secret key
(encrypted) before sending ``CreateKeypair`` with its key id, and seals a user's email with
that person's own key before sending ``CreateUser``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from commands.messages import Command
from schemas.ids import Token
from schemas.resources import ResourceSlots
from schemas.session import SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import (
    MAX_STARVATION_S,
    NAME_PATTERN,
    AgentSelection,
    DeviceFill,
    HeadOfLine,
    KeypairPolicyLimits,
    PolicyKind,
    QueuePolicy,
    Role,
    ScopeKind,
    SlotLimits,
    StoragePolicyLimits,
)

Name = Annotated[str, Field(pattern=NAME_PATTERN)]
StarvationSeconds = Annotated[int, Field(ge=0, le=MAX_STARVATION_S)]
Description = Annotated[str, Field(max_length=1024)]
Reason = Annotated[str, Field(max_length=512)]
ImageName = Annotated[
    str, Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
]

D, P, U, K = (
    AggregateType.DOMAIN,
    AggregateType.PROJECT,
    AggregateType.USER,
    AggregateType.KEYPAIR,
)
RP, RG, IM = AggregateType.RESOURCE_POLICY, AggregateType.RESOURCE_GROUP, AggregateType.IMAGE

# ---- domains ------------------------------------------------------------------------------


class CreateDomain(Command):
    aggregate_type, verb = D, "create"
    name: Name
    description: Description = ""
    total_resource_slots: SlotLimits = SlotLimits()


class ModifyDomain(Command):
    aggregate_type, verb = D, "modify"
    name: Name
    description: Description
    total_resource_slots: SlotLimits


class DeactivateDomain(Command):
    aggregate_type, verb = D, "deactivate"
    name: Name
    reason: Reason = ""


class ReactivateDomain(Command):
    aggregate_type, verb = D, "reactivate"
    name: Name


# ---- projects -----------------------------------------------------------------------------


class CreateProject(Command):
    """The project's id is ``project_id_for(domain, name)``."""

    aggregate_type, verb = P, "create"
    domain: Name
    name: Name
    description: Description = ""
    total_resource_slots: SlotLimits = SlotLimits()
    policy: Name = "default"


class ModifyProject(Command):
    aggregate_type, verb = P, "modify"
    project_id: Token
    description: Description
    total_resource_slots: SlotLimits
    policy: Name


class DeactivateProject(Command):
    aggregate_type, verb = P, "deactivate"
    project_id: Token
    reason: Reason = ""


class ReactivateProject(Command):
    aggregate_type, verb = P, "reactivate"
    project_id: Token


# ---- users --------------------------------------------------------------------------------


class CreateUser(Command):
    """The user's id is ``user_id_for(email_digest)``: a second user with the same email is
    refused by the create-once guard."""

    aggregate_type, verb = U, "create"
    domain: Name
    role: Role = Role.USER
    email_digest: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    email_sealed: Annotated[str, Field(min_length=1, max_length=4096)]
    policy: Name = "default"
    projects: tuple[Token, ...] = ()


class ModifyUser(Command):
    aggregate_type, verb = U, "modify"
    user_id: Token
    role: Role
    policy: Name


class AddUserToProject(Command):
    aggregate_type, verb = U, "join"
    user_id: Token
    project_id: Token


class RemoveUserFromProject(Command):
    aggregate_type, verb = U, "leave"
    user_id: Token
    project_id: Token


class DeactivateUser(Command):
    aggregate_type, verb = U, "deactivate"
    user_id: Token
    reason: Reason = ""


class ReactivateUser(Command):
    aggregate_type, verb = U, "reactivate"
    user_id: Token


# ---- keypairs -----------------------------------------------------------------------------


class CreateKeypair(Command):
    """``secret_key_id`` names the encrypted secret the gateway stored before sending this.
    A user's first keypair becomes their default one."""

    aggregate_type, verb = K, "create"
    access_key: Token
    user_id: Token
    secret_key_id: Annotated[str, Field(min_length=1, max_length=256)]
    policy: Name = "default"
    rate_limit: int | None = Field(default=None, ge=1)
    make_default: bool = False


class ModifyKeypair(Command):
    aggregate_type, verb = K, "modify"
    access_key: Token
    policy: Name
    rate_limit: int | None = Field(default=None, ge=1)


class SetDefaultKeypair(Command):
    aggregate_type, verb = K, "make-default"
    access_key: Token


class DeactivateKeypair(Command):
    """The keypair can no longer sign requests or create sessions; the scheduler cancels its
    pending sessions."""

    aggregate_type, verb = K, "deactivate"
    access_key: Token
    reason: Reason = ""


class ReactivateKeypair(Command):
    aggregate_type, verb = K, "reactivate"
    access_key: Token


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
    """Settings left out take ``GroupScheduling``'s defaults, except that a group disperses
    unless told otherwise (as groups always have)."""

    aggregate_type, verb = RG, "create"
    name: Name
    description: Description = ""
    queue_policy: QueuePolicy = QueuePolicy.FIFO
    agent_selection: AgentSelection = AgentSelection.DISPERSED
    allowed_session_types: tuple[SessionType, ...] = tuple(SessionType)
    head_of_line: HeadOfLine = HeadOfLine.BACKFILL
    starvation_after_s: StarvationSeconds = 300
    fragmentation_guard: bool = True
    device_fill: DeviceFill = DeviceFill.FILL


class ModifyResourceGroup(Command):
    """The group's settings, whole: every one is named, so none is reset by leaving it out."""

    aggregate_type, verb = RG, "modify"
    name: Name
    description: Description
    queue_policy: QueuePolicy
    agent_selection: AgentSelection
    allowed_session_types: tuple[SessionType, ...]
    head_of_line: HeadOfLine
    starvation_after_s: StarvationSeconds
    fragmentation_guard: bool
    device_fill: DeviceFill


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


class RegisterImage(Command):
    """The image's id is ``image_id_for(name)``."""

    aggregate_type, verb = IM, "register"
    name: ImageName
    min_resources: ResourceSlots = ResourceSlots()
    max_resources: SlotLimits = SlotLimits()


class ModifyImage(Command):
    aggregate_type, verb = IM, "modify"
    name: ImageName
    min_resources: ResourceSlots
    max_resources: SlotLimits


class ForgetImage(Command):
    aggregate_type, verb = IM, "forget"
    name: ImageName
    reason: Reason = ""


ADMIN_AGGREGATES = (D, P, U, K, RP, RG, IM)
"""The aggregate types whose commands the gateway's admin module runs."""
