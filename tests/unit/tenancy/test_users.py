"""The tenancy deciders of users, given / when / then on an in-memory store: who may create
and change whom (nobody grants more than they hold), the projects a user may join, and the
repeats that write nothing."""

from __future__ import annotations

from commands import admin as a
from commands.outcome import Code
from events.domain.tenancy import (
    UserCreated,
    UserDeactivated,
    UserJoinedProject,
    UserLeftProject,
    UserModified,
    UserReactivated,
)
from schemas.tenancy import Role, project_id_for
from tests.unit.tenancy.support import PID1, PID2, Org, by, digest, new_user, policies, user_id

# ---- creating -----------------------------------------------------------------------------


async def test_a_user_is_created_once_per_email(org: Org) -> None:
    w = org.world
    await w.given(*policies("big"))
    cmd = new_user("carol", role=Role.ADMIN, projects=(PID1,), policy="big")
    then = await w.when(cmd)
    created = UserCreated(
        domain="d1", role=Role.ADMIN, email_digest=digest("carol"), email_sealed="sealed-carol",
        policy="big", projects=(PID1,),
    )  # fmt: skip
    assert then.accepted(created) == f"user {user_id('carol')[:8]} created in domain d1"
    assert then.written_to == [f"user/{user_id('carol')}"]
    assert (await w.when(cmd)).accepted() == (
        f"user {user_id('carol')[:8]} was created by this command already"
    )
    (await w.when(new_user("carol", domain="d2"))).rejected(
        Code.CONFLICT, "a user with this email already exists"
    )


async def test_a_domain_admin_creates_users_of_their_domain_up_to_their_own_role(
    org: Org,
) -> None:
    w = org.world
    made = await w.when(new_user("carol", role=Role.ADMIN, actor=org.admin1.actor))
    assert [type(e) for e in made.events] == [UserCreated]
    refusals = [
        (new_user("dan", role=Role.SUPERADMIN, actor=org.admin1.actor),
         "a admin of domain d1 may not grant or change the role superadmin"),
        (new_user("dan", actor=org.admin2.actor),
         "a admin of domain d2 may not create users in domain d1"),
        (new_user("dan", actor=org.alice.actor),
         "a user of domain d1 may not create users in domain d1"),
        (new_user("dan", actor=org.mona.actor),
         "a monitor of domain d1 may not create users in domain d1"),
    ]  # fmt: skip
    for cmd, said in refusals:
        (await w.when(cmd)).rejected(Code.FORBIDDEN, said)
    superadmin = await w.when(new_user("dan", role=Role.SUPERADMIN, actor=org.root.actor))
    assert [type(e) for e in superadmin.events] == [UserCreated]


async def test_a_user_needs_a_usable_domain_a_known_policy_and_projects_of_their_domain(
    org: Org,
) -> None:
    w = org.world
    await w.given(a.DeactivateDomain(name="d2", **by()))
    await w.given(a.CreateProject(domain="d1", name="old", **by()))
    old = project_id_for("d1", "old")
    await w.given(a.DeactivateProject(project_id=old, **by()))
    refusals = [
        (new_user("dan", domain="nope"), Code.NOT_FOUND, "there is no domain nope: create it"),
        (new_user("dan", domain="d2"), Code.INVALID, "domain d2 is deactivated"),
        (new_user("dan", policy="nope"), Code.NOT_FOUND, "there is no user resource policy nope"),
        (new_user("dan", projects=("nope",)), Code.NOT_FOUND, "there is no project nope"),
        (new_user("dan", projects=(PID1, PID2)), Code.INVALID,
         "project ml belongs to domain d2, not d1: a user joins projects of their own domain"),
        (new_user("dan", projects=(old,)), Code.INVALID, "project old is deactivated"),
    ]  # fmt: skip
    for cmd, code, said in refusals:
        (await w.when(cmd)).rejected(code, said)


# ---- changing -----------------------------------------------------------------------------


async def test_a_user_is_modified_by_an_admin_who_could_grant_both_roles(org: Org) -> None:
    w = org.world
    await w.given(*policies("big"))
    cmd = a.ModifyUser(
        user_id=org.alice.user_id, role=Role.ADMIN, policy="big", **by(org.admin1.actor)
    )
    then = await w.when(cmd)
    assert then.accepted(UserModified(role=Role.ADMIN, policy="big")) == (
        f"user {org.alice.user_id[:8]} modified"
    )
    assert (await w.when(cmd)).accepted() == (
        f"user {org.alice.user_id[:8]} already had these settings"
    )
    root = a.ModifyUser(
        user_id=org.root.user_id, role=Role.USER, policy="default", **by(org.admin1.actor)
    )
    refusals = [
        # Nobody changes a person who holds more than they could grant.
        (root, "a admin of domain d1 may not grant or change the role superadmin"),
        (cmd.model_copy(update={"role": Role.SUPERADMIN}), "may not grant or change the role"),
        (cmd.model_copy(update={"actor": org.admin2.actor}),
         "a admin of domain d2 may not change users of domain d1"),
        (cmd.model_copy(update={"actor": org.bob.actor, "role": Role.USER}),
         "a user of domain d1 may not grant or change the role user"),
    ]  # fmt: skip
    for refused, said in refusals:
        (await w.when(refused)).rejected(Code.FORBIDDEN, said)
    (await w.when(cmd.model_copy(update={"policy": "nope"}))).rejected(
        Code.NOT_FOUND, "there is no user resource policy nope"
    )
    (await w.when(cmd.model_copy(update={"user_id": "nope"}))).rejected(
        Code.NOT_FOUND, "there is no user nope"
    )
    demote = root.model_copy(update={"actor": org.root.actor})
    assert [type(e) for e in (await w.when(demote)).events] == [UserModified]


async def test_a_user_joins_and_leaves_projects_of_their_domain(org: Org) -> None:
    w = org.world
    await w.given(a.CreateProject(domain="d1", name="cv", **by()))
    cv = project_id_for("d1", "cv")
    join = a.AddUserToProject(user_id=org.alice.user_id, project_id=cv, **by(org.admin1.actor))
    then = await w.when(join)
    assert then.accepted(UserJoinedProject(project_id=cv)) == (
        f"user {org.alice.user_id[:8]} joined cv"
    )
    assert (await w.when(join)).accepted() == f"user {org.alice.user_id[:8]} was already in cv"
    alice = w.directory.principal(org.alice.actor)
    assert alice is not None and alice.projects == frozenset({PID1, cv})
    leave = a.RemoveUserFromProject(user_id=org.alice.user_id, project_id=cv, **by())
    assert (await w.when(leave)).accepted(UserLeftProject(project_id=cv)) == (
        f"user {org.alice.user_id[:8]} left cv"
    )
    assert (await w.when(leave)).accepted() == f"user {org.alice.user_id[:8]} was not in cv"


async def test_joining_a_project_is_refused_across_domains_and_when_deactivated(
    org: Org,
) -> None:
    w = org.world
    await w.given(a.DeactivateProject(project_id=PID1, **by()))
    alice = org.alice.user_id
    refusals = [
        (a.AddUserToProject(user_id=alice, project_id=PID2, **by()), Code.INVALID,
         "project ml belongs to domain d2, not d1"),
        (a.AddUserToProject(user_id=org.admin1.user_id, project_id=PID1, **by()), Code.INVALID,
         "project ml is deactivated"),
        (a.AddUserToProject(user_id=alice, project_id="nope", **by()), Code.NOT_FOUND,
         "there is no project nope"),
        (a.AddUserToProject(user_id="nope", project_id=PID1, **by()), Code.NOT_FOUND,
         "there is no user nope"),
        (a.RemoveUserFromProject(user_id=alice, project_id=PID1, **by(org.admin2.actor)),
         Code.FORBIDDEN, "a admin of domain d2 may not change users of domain d1"),
        (a.RemoveUserFromProject(user_id=alice, project_id=PID1, **by(org.bob.actor)),
         Code.FORBIDDEN, "a user of domain d1 may not change users of domain d1"),
    ]  # fmt: skip
    for cmd, code, said in refusals:
        (await w.when(cmd)).rejected(code, said)


async def test_a_deactivated_user_is_nobody_until_reactivated(org: Org) -> None:
    w = org.world
    off = a.DeactivateUser(user_id=org.alice.user_id, reason="left", **by(org.admin1.actor))
    then = await w.when(off)
    assert then.accepted(UserDeactivated(reason="left")) == (
        f"user {org.alice.user_id[:8]} deactivated"
    )
    assert (await w.when(off)).accepted() == f"user {org.alice.user_id[:8]} was already deactivated"
    assert w.directory.principal(org.alice.actor) is None
    (await w.when(a.DeactivateUser(user_id=org.bob.user_id, **by(org.alice.actor)))).rejected(
        Code.FORBIDDEN, "keypair AKalice is unknown or deactivated"
    )
    on = a.ReactivateUser(user_id=org.alice.user_id, **by(org.admin1.actor))
    assert (await w.when(on)).accepted(UserReactivated()) == (
        f"user {org.alice.user_id[:8]} reactivated"
    )
    assert (await w.when(on)).accepted() == f"user {org.alice.user_id[:8]} was already active"
    assert w.directory.principal(org.alice.actor) is not None


async def test_a_user_is_deactivated_only_by_an_admin_who_could_grant_their_role(
    org: Org,
) -> None:
    w = org.world
    refusals = [
        (a.DeactivateUser(user_id=org.root.user_id, **by(org.admin1.actor)),
         "a admin of domain d1 may not grant or change the role superadmin"),
        (a.DeactivateUser(user_id=org.alice.user_id, **by(org.alice.actor)),
         "a user of domain d1 may not change users of domain d1"),
        (a.DeactivateUser(user_id=org.alice.user_id, **by(org.mona.actor)),
         "a monitor of domain d1 may not change users of domain d1"),
        (a.ReactivateUser(user_id=org.alice.user_id, **by(org.admin2.actor)),
         "a admin of domain d2 may not change users of domain d1"),
    ]  # fmt: skip
    for cmd, said in refusals:
        (await w.when(cmd)).rejected(Code.FORBIDDEN, said)
    (await w.when(a.ReactivateUser(user_id="nope", **by()))).rejected(
        Code.NOT_FOUND, "there is no user nope"
    )


async def test_an_admin_of_another_domain_learns_nothing_about_its_projects(org: Org) -> None:
    """Whether the project exists is asked only of someone allowed to change the user."""
    w = org.world
    for project_id in ("no-such-project", PID1):
        cmd = a.AddUserToProject(user_id=org.alice.user_id, project_id=project_id, **by(
            org.admin2.actor
        ))  # fmt: skip
        (await w.when(cmd)).rejected(
            Code.FORBIDDEN, "a admin of domain d2 may not change users of domain d1"
        )
    cmd = a.AddUserToProject(user_id=org.alice.user_id, project_id="no-such-project", **by(
        org.admin1.actor
    ))  # fmt: skip
    (await w.when(cmd)).rejected(Code.NOT_FOUND, "there is no project no-such-project")
