"""The tenancy deciders of domains, projects and resource policies, given / when / then on an
in-memory store: events written, repeats that write nothing, and every refusal."""

from __future__ import annotations

from typing import Any

from commands import admin as a
from commands.outcome import Code
from events.domain.tenancy import (
    DomainCreated,
    DomainDeactivated,
    DomainModified,
    DomainReactivated,
    ProjectCreated,
    ProjectDeactivated,
    ProjectModified,
    ProjectReactivated,
    ResourcePolicyCreated,
    ResourcePolicyModified,
)
from schemas.tenancy import (
    KeypairPolicyLimits,
    PolicyKind,
    SlotLimits,
    StoragePolicyLimits,
    project_id_for,
)
from tests.unit.tenancy.support import PID1, Org, by, policies

GPU2 = SlotLimits(gpu_hundredths=200)
KP = PolicyKind.KEYPAIR

# ---- domains ------------------------------------------------------------------------------


async def test_a_cluster_admin_creates_a_domain_once(org: Org) -> None:
    w = org.world
    cmd = a.CreateDomain(name="d3", description="research", total_resource_slots=GPU2, **by())
    then = await w.when(cmd)
    assert then.accepted(DomainCreated(description="research", total_resource_slots=GPU2)) == (
        "domain d3 created"
    )
    assert then.written_to == ["domain/d3"]
    # The same command again (a redelivery) is done; another one is a duplicate.
    again = await w.when(cmd)
    assert again.accepted() == "domain d3 was created by this command already"
    (await w.when(a.CreateDomain(name="d3", **by()))).rejected(
        Code.CONFLICT, "domain d3 already exists"
    )
    (await w.when(a.CreateDomain(name="d4", **by(org.root.actor)))).accepted(DomainCreated())


async def test_only_a_superadmin_creates_or_changes_domains(org: Org) -> None:
    w = org.world
    for person, role in ((org.admin1, "admin"), (org.alice, "user"), (org.mona, "monitor")):
        (await w.when(a.CreateDomain(name="d3", **by(person.actor)))).rejected(
            Code.FORBIDDEN, f"a {role} of domain d1 may not create domains"
        )
    for cmd in (
        a.ModifyDomain(
            name="d1", description="x", total_resource_slots=GPU2, **by(org.admin1.actor)
        ),
        a.DeactivateDomain(name="d1", **by(org.admin1.actor)),
        a.ReactivateDomain(name="d1", **by(org.admin1.actor)),
    ):
        (await w.when(cmd)).rejected(Code.FORBIDDEN, "a admin of domain d1 may not change domains")


async def test_a_domain_is_modified_once(org: Org) -> None:
    w = org.world
    cmd = a.ModifyDomain(name="d1", description="ml", total_resource_slots=GPU2, **by())
    then = await w.when(cmd)
    assert then.accepted(DomainModified(description="ml", total_resource_slots=GPU2)) == (
        "domain d1 modified"
    )
    assert w.directory.domains["d1"].total_resource_slots == GPU2
    again = await w.when(cmd.model_copy(update={"command_id": "again"}))
    assert again.accepted() == "domain d1 already had these settings"
    missing = a.ModifyDomain(name="nope", description="", total_resource_slots=GPU2, **by())
    (await w.when(missing)).rejected(Code.NOT_FOUND, "there is no domain nope")


async def test_a_deactivated_domain_refuses_its_people_and_new_projects(org: Org) -> None:
    w = org.world
    then = await w.when(a.DeactivateDomain(name="d1", reason="closed", **by(org.root.actor)))
    assert then.accepted(DomainDeactivated(reason="closed")) == "domain d1 deactivated"
    again = await w.when(a.DeactivateDomain(name="d1", **by()))
    assert again.accepted() == "domain d1 was already deactivated"
    # Its people are no longer anyone (root too: a superadmin belongs to a domain).
    (await w.when(a.CreateProject(domain="d1", name="p2", **by(org.admin1.actor)))).rejected(
        Code.FORBIDDEN, "keypair AKadmin1 is unknown or deactivated"
    )
    (await w.when(a.ReactivateDomain(name="d1", **by(org.root.actor)))).rejected(
        Code.FORBIDDEN, "keypair AKroot is unknown or deactivated"
    )
    (await w.when(a.CreateProject(domain="d1", name="p2", **by()))).rejected(
        Code.INVALID, "domain d1 is deactivated"
    )
    back = await w.when(a.ReactivateDomain(name="d1", **by()))
    assert back.accepted(DomainReactivated()) == "domain d1 reactivated"
    again = await w.when(a.ReactivateDomain(name="d1", **by()))
    assert again.accepted() == "domain d1 was already active"
    (await w.when(a.CreateProject(domain="d1", name="p2", **by(org.admin1.actor)))).accepted(
        ProjectCreated(domain="d1", name="p2")
    )


# ---- projects -----------------------------------------------------------------------------


async def test_a_domain_admin_creates_projects_in_their_domain_only(org: Org) -> None:
    w = org.world
    await w.given(*policies("gpu"))
    cmd = a.CreateProject(
        domain="d1", name="cv", description="vision", total_resource_slots=GPU2, policy="gpu",
        **by(org.admin1.actor),
    )  # fmt: skip
    then = await w.when(cmd)
    created = ProjectCreated(
        domain="d1", name="cv", description="vision", total_resource_slots=GPU2, policy="gpu"
    )
    assert then.accepted(created) == "project cv created in domain d1"
    assert then.written_to == [f"project/{project_id_for('d1', 'cv')}"]
    assert (await w.when(cmd)).accepted() == (
        "project cv in domain d1 was created by this command already"
    )
    (await w.when(a.CreateProject(domain="d1", name="cv", **by()))).rejected(
        Code.CONFLICT, "project cv in domain d1 already exists"
    )
    refusals = [
        (org.admin2, "a admin of domain d2 may not create projects in domain d1"),
        (org.alice, "a user of domain d1 may not create projects in domain d1"),
        (org.mona, "a monitor of domain d1 may not create projects in domain d1"),
    ]
    for person, said in refusals:
        cmd = a.CreateProject(domain="d1", name="p9", **by(person.actor))
        (await w.when(cmd)).rejected(Code.FORBIDDEN, said)
    # A domain admin asking about another domain is refused before it is looked up.
    (await w.when(a.CreateProject(domain="nope", name="p", **by(org.admin1.actor)))).rejected(
        Code.FORBIDDEN, "may not create projects in domain nope"
    )


async def test_a_project_needs_its_domain_and_policy(org: Org) -> None:
    w = org.world
    (await w.when(a.CreateProject(domain="nope", name="p", **by()))).rejected(
        Code.NOT_FOUND, "there is no domain nope: create it first"
    )
    (await w.when(a.CreateProject(domain="d1", name="p", policy="nope", **by()))).rejected(
        Code.NOT_FOUND, "there is no project resource policy nope: create it first"
    )


async def test_a_project_is_modified_by_its_domain_admin(org: Org) -> None:
    w = org.world
    cmd = a.ModifyProject(
        project_id=PID1, description="ml", total_resource_slots=GPU2, policy="default",
        **by(org.admin1.actor),
    )  # fmt: skip
    then = await w.when(cmd)
    changed = ProjectModified(description="ml", total_resource_slots=GPU2, policy="default")
    assert then.accepted(changed) == "project ml modified"
    assert (await w.when(cmd)).accepted() == "project ml already had these settings"
    other = cmd.model_copy(update={"actor": org.admin2.actor})
    (await w.when(other)).rejected(
        Code.FORBIDDEN, "a admin of domain d2 may not change projects of d1"
    )
    (await w.when(cmd.model_copy(update={"policy": "nope"}))).rejected(
        Code.NOT_FOUND, "there is no project resource policy nope"
    )
    (await w.when(cmd.model_copy(update={"project_id": "nope"}))).rejected(
        Code.NOT_FOUND, "there is no project nope"
    )


async def test_a_project_is_deactivated_and_reactivated_once(org: Org) -> None:
    w = org.world
    off = a.DeactivateProject(project_id=PID1, reason="done", **by(org.admin1.actor))
    assert (await w.when(off)).accepted(ProjectDeactivated(reason="done")) == (
        "project ml deactivated"
    )
    assert (await w.when(off)).accepted() == "project ml was already deactivated"
    # A deactivated project grants its members nothing.
    alice = w.directory.principal(org.alice.actor)
    assert alice is not None and alice.projects == frozenset()
    (await w.when(a.ReactivateProject(project_id=PID1, **by(org.alice.actor)))).rejected(
        Code.FORBIDDEN, "a user of domain d1 may not change projects of d1"
    )
    on = a.ReactivateProject(project_id=PID1, **by(org.root.actor))
    assert (await w.when(on)).accepted(ProjectReactivated()) == "project ml reactivated"
    assert (await w.when(on)).accepted() == "project ml was already active"
    (await w.when(a.DeactivateProject(project_id="nope", **by()))).rejected(
        Code.NOT_FOUND, "there is no project nope"
    )


# ---- resource policies --------------------------------------------------------------------


async def test_a_resource_policy_is_created_once_with_the_right_half(org: Org) -> None:
    w = org.world
    limits = KeypairPolicyLimits(max_concurrent_sessions=2)
    cmd = a.CreateResourcePolicy(kind=KP, name="small", keypair=limits, **by(org.root.actor))
    then = await w.when(cmd)
    created = ResourcePolicyCreated(kind=KP, name="small", keypair=limits)
    assert then.accepted(created) == "keypair resource policy small created"
    assert then.written_to == ["resource_policy/keypair-small"]
    assert (await w.when(cmd)).accepted() == (
        "keypair resource policy small was created by this command already"
    )
    (await w.when(a.CreateResourcePolicy(kind=KP, name="small", keypair=limits, **by()))).rejected(
        Code.CONFLICT, "keypair resource policy small already exists"
    )
    storage = StoragePolicyLimits(max_vfolder_count=3)
    user = a.CreateResourcePolicy(kind=PolicyKind.USER, name="small", storage=storage, **by())
    (await w.when(user)).accepted(
        ResourcePolicyCreated(kind=PolicyKind.USER, name="small", storage=storage)
    )


async def test_a_resource_policy_with_the_wrong_limits_is_invalid(org: Org) -> None:
    w = org.world
    storage, keypair = StoragePolicyLimits(), KeypairPolicyLimits()
    wrong: list[tuple[PolicyKind, dict[str, Any], str]] = [
        (
            KP,
            {"storage": storage},
            "a keypair resource policy sets 'keypair' limits, not 'storage'",
        ),
        (KP, {"keypair": keypair, "storage": storage}, "sets 'keypair' limits, not 'storage'"),
        (PolicyKind.USER, {"keypair": keypair}, "a user resource policy sets 'storage' limits"),
        (PolicyKind.PROJECT, {}, "a project resource policy sets 'storage' limits"),
    ]
    for kind, limits, said in wrong:
        cmd = a.CreateResourcePolicy(kind=kind, name="new", **limits, **by())
        (await w.when(cmd)).rejected(Code.INVALID, said)
        change = a.ModifyResourcePolicy(kind=kind, name="default", **limits, **by())
        (await w.when(change)).rejected(Code.INVALID, said)


async def test_a_resource_policy_is_modified_by_a_superadmin_only(org: Org) -> None:
    w = org.world
    limits = KeypairPolicyLimits(max_pending_sessions=1)
    cmd = a.ModifyResourcePolicy(kind=KP, name="default", keypair=limits, **by())
    then = await w.when(cmd)
    assert then.accepted(ResourcePolicyModified(keypair=limits)) == (
        "keypair resource policy default modified"
    )
    assert w.directory.keypair_limits(org.alice.access_key) == limits
    assert (
        await w.when(cmd)
    ).accepted() == "keypair resource policy default already had these limits"
    (await w.when(cmd.model_copy(update={"name": "nope"}))).rejected(
        Code.NOT_FOUND, "there is no keypair resource policy nope"
    )
    for person in (org.admin1, org.alice):
        (await w.when(cmd.model_copy(update={"actor": person.actor}))).rejected(
            Code.FORBIDDEN, "may not change resource policies"
        )
    created = a.CreateResourcePolicy(kind=KP, name="x", keypair=limits, **by(org.admin1.actor))
    (await w.when(created)).rejected(
        Code.FORBIDDEN, "a admin of domain d1 may not create resource policies"
    )
