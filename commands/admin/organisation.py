"""Admin commands on the organisation: domains (``cmd.domain.*``) and projects
(``cmd.project.*``)."""

from __future__ import annotations

from commands.admin.fields import Description, Name, Reason
from commands.messages import Command
from schemas.fair_share import SHARE_DEFAULT, FairShare
from schemas.ids import Token
from schemas.subjects import AggregateType
from schemas.tenancy import SlotLimits

D, P = AggregateType.DOMAIN, AggregateType.PROJECT

# ---- domains ------------------------------------------------------------------------------


class CreateDomain(Command):
    aggregate_type, verb = D, "create"
    name: Name
    description: Description = ""
    total_resource_slots: SlotLimits = SlotLimits()
    fair_share: FairShare = SHARE_DEFAULT


class ModifyDomain(Command):
    aggregate_type, verb = D, "modify"
    name: Name
    description: Description
    total_resource_slots: SlotLimits
    fair_share: FairShare | None = None
    """None keeps the domain's share."""


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
    fair_share: FairShare = SHARE_DEFAULT


class ModifyProject(Command):
    aggregate_type, verb = P, "modify"
    project_id: Token
    description: Description
    total_resource_slots: SlotLimits
    policy: Name
    fair_share: FairShare | None = None
    """None keeps the project's share."""


class DeactivateProject(Command):
    aggregate_type, verb = P, "deactivate"
    project_id: Token
    reason: Reason = ""


class ReactivateProject(Command):
    aggregate_type, verb = P, "reactivate"
    project_id: Token
