"""Every tenancy command and the pure function that decides it (one literal table)."""

from __future__ import annotations

from collections.abc import Mapping

from commands import admin as a
from commands.admin import corrections as c
from commands.messages import Command
from services.tenancy import corrections, people
from services.tenancy import domains as org
from services.tenancy import join_tokens as join
from services.tenancy import registries as reg
from services.tenancy import resources as res
from services.tenancy.common import Decide

DECIDERS: Mapping[type[Command], Decide] = {
    a.CreateDomain: org.create_domain,
    a.ModifyDomain: org.modify_domain,
    a.DeactivateDomain: org.deactivate_domain,
    a.ReactivateDomain: org.reactivate_domain,
    a.CreateProject: org.create_project,
    a.ModifyProject: org.modify_project,
    a.DeactivateProject: org.deactivate_project,
    a.ReactivateProject: org.reactivate_project,
    a.CreateUser: people.create_user,
    a.ModifyUser: people.modify_user,
    a.AddUserToProject: people.add_user_to_project,
    a.RemoveUserFromProject: people.remove_user_from_project,
    a.DeactivateUser: people.deactivate_user,
    a.ReactivateUser: people.reactivate_user,
    a.CreateKeypair: people.create_keypair,
    a.ModifyKeypair: people.modify_keypair,
    a.SetDefaultKeypair: people.set_default_keypair,
    a.DeactivateKeypair: people.deactivate_keypair,
    a.ReactivateKeypair: people.reactivate_keypair,
    a.CreateResourcePolicy: org.create_resource_policy,
    a.ModifyResourcePolicy: org.modify_resource_policy,
    a.CreateResourceGroup: res.create_resource_group,
    a.ModifyResourceGroup: res.modify_resource_group,
    a.AssociateResourceGroup: res.associate_resource_group,
    a.DisassociateResourceGroup: res.disassociate_resource_group,
    a.DeactivateResourceGroup: res.deactivate_resource_group,
    a.ReactivateResourceGroup: res.reactivate_resource_group,
    a.RegisterImage: res.register_image,
    a.ModifyImage: res.modify_image,
    a.ForgetImage: res.forget_image,
    a.RecordScannedImage: reg.record_scanned_image,
    a.SetImagePullPolicy: reg.set_image_pull_policy,
    a.AddRegistry: reg.add_registry,
    a.ModifyRegistry: reg.modify_registry,
    a.RemoveRegistry: reg.remove_registry,
    a.CreateJoinToken: join.create_join_token,
    a.RevokeJoinToken: join.revoke_join_token,
    a.JoinNode: join.join_node,
    c.SkipQuarantinedEvent: corrections.skip_quarantined_event,
    c.VoidAggregate: corrections.void_aggregate,
}
