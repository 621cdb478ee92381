"""The tenancy service's decisions on organisation: ``cmd.domain.*``, ``cmd.project.*`` and
``cmd.resource_policy.*``, one pure function per command deciding on the folded
``Directory`` (people: ``people``; resource groups and images: ``resources``).

Each checks who may act (``commands.authorisation``; ``who`` is None for a trusted service),
then the rules that span aggregates, then lets the aggregates decide on working copies. It
returns the changed aggregates (the service writes them as one guarded commit) or a refusal.
Nothing here does I/O or reads the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from commands import admin as a
from commands.directory import Directory
from commands.tenancy import Domain, Project, ResourcePolicy
from schemas.subjects import AggregateType
from schemas.tenancy import PolicyKind, policy_id_for, project_id_for
from services.tenancy.common import (
    Change,
    Decision,
    Who,
    acted,
    cluster_admin,
    domain_admin,
    exists,
    missing,
    policy_known,
    said,
    usable_domain,
    working_copy,
)

# ---- domains ------------------------------------------------------------------------------


def create_domain(cmd: a.CreateDomain, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "create domains"):
        return refused
    if cmd.name in d.domains:
        return exists(d, AggregateType.DOMAIN, cmd.name, cmd, f"domain {cmd.name}")
    domain = Domain.create(cmd.name, cmd.description, cmd.total_resource_slots, now, cmd.fair_share)
    return Change((domain,), f"domain {cmd.name} created")


def _domain_change(
    cmd: Any, d: Directory, who: Who, act: Callable[[Domain], bool], done: str, already: str
) -> Decision:
    if refused := cluster_admin(who, "change domains"):
        return refused
    domain = d.domains.get(cmd.name)
    if domain is None:
        return missing(f"domain {cmd.name}")
    return acted(domain, f"domain {cmd.name}", act, done, already)


def modify_domain(cmd: a.ModifyDomain, d: Directory, who: Who, now: datetime) -> Decision:
    def act(x: Domain) -> bool:
        return x.modify(cmd.description, cmd.total_resource_slots, now, cmd.fair_share)

    return _domain_change(cmd, d, who, act, "modified", "already had these settings")


def deactivate_domain(cmd: a.DeactivateDomain, d: Directory, who: Who, now: datetime) -> Decision:
    def act(x: Domain) -> bool:
        return x.deactivate(cmd.reason, now)

    return _domain_change(cmd, d, who, act, "deactivated", "was already deactivated")


def reactivate_domain(cmd: a.ReactivateDomain, d: Directory, who: Who, now: datetime) -> Decision:
    return _domain_change(
        cmd, d, who, lambda x: x.reactivate(now), "reactivated", "was already active"
    )


# ---- projects -----------------------------------------------------------------------------


def create_project(cmd: a.CreateProject, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := domain_admin(who, cmd.domain, f"create projects in domain {cmd.domain}"):
        return refused
    project_id = project_id_for(cmd.domain, cmd.name)
    if project_id in d.projects:
        what = f"project {cmd.name} in domain {cmd.domain}"
        return exists(d, AggregateType.PROJECT, project_id, cmd, what)
    if refused := usable_domain(d, cmd.domain) or policy_known(d, PolicyKind.PROJECT, cmd.policy):
        return refused
    project = Project.create(
        project_id, cmd.domain, cmd.name, cmd.description, cmd.total_resource_slots,
        cmd.policy, now, cmd.fair_share,
    )  # fmt: skip
    return Change((project,), f"project {cmd.name} created in domain {cmd.domain}")


def _project_change(
    cmd: Any, d: Directory, who: Who, act: Callable[[Project], bool], done: str, already: str
) -> Decision:
    project = d.projects.get(cmd.project_id)
    if project is None:
        return missing(f"project {cmd.project_id}")
    if refused := domain_admin(who, project.domain, f"change projects of {project.domain}"):
        return refused
    return acted(project, f"project {project.name}", act, done, already)


def modify_project(cmd: a.ModifyProject, d: Directory, who: Who, now: datetime) -> Decision:
    if cmd.project_id in d.projects and (
        refused := policy_known(d, PolicyKind.PROJECT, cmd.policy)
    ):
        return refused

    def act(x: Project) -> bool:
        return x.modify(cmd.description, cmd.total_resource_slots, cmd.policy, now, cmd.fair_share)

    return _project_change(cmd, d, who, act, "modified", "already had these settings")


def deactivate_project(cmd: a.DeactivateProject, d: Directory, who: Who, now: datetime) -> Decision:
    def act(x: Project) -> bool:
        return x.deactivate(cmd.reason, now)

    return _project_change(cmd, d, who, act, "deactivated", "was already deactivated")


def reactivate_project(cmd: a.ReactivateProject, d: Directory, who: Who, now: datetime) -> Decision:
    return _project_change(
        cmd, d, who, lambda x: x.reactivate(now), "reactivated", "was already active"
    )


# ---- resource policies --------------------------------------------------------------------


def create_resource_policy(
    cmd: a.CreateResourcePolicy, d: Directory, who: Who, now: datetime
) -> Decision:
    if refused := cluster_admin(who, "create resource policies"):
        return refused
    what = f"{cmd.kind.value} resource policy {cmd.name}"
    policy_id = policy_id_for(cmd.kind, cmd.name)
    if policy_id in d.policies:
        return exists(d, AggregateType.RESOURCE_POLICY, policy_id, cmd, what)
    policy = ResourcePolicy.create(cmd.kind, cmd.name, cmd.keypair, cmd.storage, now)
    return Change((policy,), f"{what} created")


def modify_resource_policy(
    cmd: a.ModifyResourcePolicy, d: Directory, who: Who, now: datetime
) -> Decision:
    if refused := cluster_admin(who, "change resource policies"):
        return refused
    what = f"{cmd.kind.value} resource policy {cmd.name}"
    policy = working_copy(d.policies.get(policy_id_for(cmd.kind, cmd.name)))
    if policy is None:
        return missing(what)
    changed = policy.modify(cmd.keypair, cmd.storage, now)
    return Change((policy,), f"{what} " + said(changed, "modified", "already had these limits"))
