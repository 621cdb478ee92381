"""Admin commands on the tenancy aggregates (``cmd.domain.*``, ``cmd.project.*``,
``cmd.user.*``, ``cmd.keypair.*``, ``cmd.resource_policy.*``, ``cmd.resource_group.*``,
``cmd.image.*``, ``cmd.registry.*``, ``cmd.join_token.*``), decided by the tenancy service.
One module per family: ``organisation`` (domains, projects), ``people`` (users, keypairs),
``resources`` (resource policies, resource groups, images), ``registries``, ``join_tokens``;
all are importable from here.

They carry no secret and no personal data in clear: the gateway stores a keypair's secret key
(encrypted) before sending ``CreateKeypair`` with its key id, and seals a user's email with
that person's own key before sending ``CreateUser``.
"""

from __future__ import annotations

from commands.admin.corrections import SkipQuarantinedEvent, VoidAggregate
from commands.admin.fields import (
    Description,
    ImageName,
    Name,
    Reason,
)
from commands.admin.join_tokens import CreateJoinToken, JoinNode, RevokeJoinToken
from commands.admin.organisation import (
    CreateDomain,
    CreateProject,
    DeactivateDomain,
    DeactivateProject,
    ModifyDomain,
    ModifyProject,
    ReactivateDomain,
    ReactivateProject,
)
from commands.admin.people import (
    AddUserToProject,
    CreateKeypair,
    CreateUser,
    DeactivateKeypair,
    DeactivateUser,
    FirstKeypair,
    ModifyKeypair,
    ModifyUser,
    ReactivateKeypair,
    ReactivateUser,
    RemoveUserFromProject,
    SetDefaultKeypair,
)
from commands.admin.registries import (
    AddRegistry,
    ModifyRegistry,
    RecordScannedImage,
    RemoveRegistry,
    SetImagePullPolicy,
)
from commands.admin.resources import (
    AssociateResourceGroup,
    CreateResourceGroup,
    CreateResourcePolicy,
    DeactivateResourceGroup,
    DisassociateResourceGroup,
    ForgetImage,
    ModifyImage,
    ModifyResourceGroup,
    ModifyResourcePolicy,
    ReactivateResourceGroup,
    RegisterImage,
)
from schemas.subjects import AggregateType

ADMIN_AGGREGATES = (
    AggregateType.DOMAIN,
    AggregateType.PROJECT,
    AggregateType.USER,
    AggregateType.KEYPAIR,
    AggregateType.RESOURCE_POLICY,
    AggregateType.RESOURCE_GROUP,
    AggregateType.IMAGE,
    AggregateType.REGISTRY,
    AggregateType.JOIN_TOKEN,
    AggregateType.CORRECTION,
)
"""The aggregate types whose commands the tenancy service runs."""

__all__ = [
    "ADMIN_AGGREGATES",
    "AddRegistry",
    "AddUserToProject",
    "AssociateResourceGroup",
    "CreateDomain",
    "CreateJoinToken",
    "CreateKeypair",
    "CreateProject",
    "CreateResourceGroup",
    "CreateResourcePolicy",
    "CreateUser",
    "DeactivateDomain",
    "DeactivateKeypair",
    "DeactivateProject",
    "DeactivateResourceGroup",
    "DeactivateUser",
    "Description",
    "DisassociateResourceGroup",
    "FirstKeypair",
    "ForgetImage",
    "ImageName",
    "JoinNode",
    "ModifyDomain",
    "ModifyImage",
    "ModifyKeypair",
    "ModifyProject",
    "ModifyRegistry",
    "ModifyResourceGroup",
    "ModifyResourcePolicy",
    "ModifyUser",
    "Name",
    "ReactivateDomain",
    "ReactivateKeypair",
    "ReactivateProject",
    "ReactivateResourceGroup",
    "ReactivateUser",
    "Reason",
    "RecordScannedImage",
    "RegisterImage",
    "RemoveRegistry",
    "RemoveUserFromProject",
    "RevokeJoinToken",
    "SetDefaultKeypair",
    "SetImagePullPolicy",
    "SkipQuarantinedEvent",
    "VoidAggregate",
]
