"""The tenancy deciders of keypairs, given / when / then on an in-memory store: a user's first
keypair becomes their default in the same commit, owners may revoke or choose their own keys
but only admins issue and change them."""

from __future__ import annotations

from commands import admin as a
from commands.outcome import Code
from events.domain.tenancy import (
    KeypairCreated,
    KeypairDeactivated,
    KeypairModified,
    KeypairReactivated,
    UserDefaultKeypairSet,
)
from tests.unit.tenancy.support import Org, by, new_keypair, new_user, policies, user_id


async def test_a_first_keypair_becomes_its_users_default_in_the_same_commit(org: Org) -> None:
    w = org.world
    await w.given(new_user("carol"))
    commits = w.store.commits
    cmd = new_keypair("AKc1", "carol", rate_limit=60, actor=org.admin1.actor)
    then = await w.when(cmd)
    created = KeypairCreated(
        user_id=user_id("carol"), domain="d1", secret_key_id="secret-AKc1", rate_limit=60
    )
    message = then.accepted(created, UserDefaultKeypairSet(access_key="AKc1"))
    assert message == f"keypair AKc1 created for user {user_id('carol')[:8]} (their default)"
    assert then.written_to == ["keypair/AKc1", f"user/{user_id('carol')}"]
    assert w.store.commits == commits + 1  # one atomic commit for both aggregates
    assert w.directory.users[user_id("carol")].default_access_key == "AKc1"
    assert (await w.when(cmd)).accepted() == "keypair AKc1 was created by this command already"
    (await w.when(new_keypair("AKc1", "carol"))).rejected(
        Code.CONFLICT, "keypair AKc1 already exists"
    )


async def test_a_later_keypair_becomes_the_default_only_when_asked(org: Org) -> None:
    w = org.world
    second = await w.when(new_keypair("AKa2", "alice"))
    created = KeypairCreated(user_id=org.alice.user_id, domain="d1", secret_key_id="secret-AKa2")
    assert second.accepted(created) == f"keypair AKa2 created for user {org.alice.user_id[:8]}"
    third = await w.when(new_keypair("AKa3", "alice", make_default=True))
    assert [type(e) for e in third.events] == [KeypairCreated, UserDefaultKeypairSet]
    assert third.written_to[1] == f"user/{org.alice.user_id}"
    assert w.directory.users[org.alice.user_id].default_access_key == "AKa3"


async def test_keypairs_are_issued_by_admins_of_the_users_domain_to_active_users(
    org: Org,
) -> None:
    w = org.world
    await w.given(new_user("carol"), a.DeactivateUser(user_id=user_id("carol"), **by()))
    refusals = [
        (new_keypair("AKx", "alice", actor=org.alice.actor), Code.FORBIDDEN,
         "a user of domain d1 may not issue keypairs in domain d1"),
        (new_keypair("AKx", "alice", actor=org.admin2.actor), Code.FORBIDDEN,
         "a admin of domain d2 may not issue keypairs in domain d1"),
        (new_keypair("AKx", "alice", actor=org.mona.actor), Code.FORBIDDEN,
         "a monitor of domain d1 may not issue keypairs in domain d1"),
        (new_keypair("AKx", "nobody"), Code.NOT_FOUND,
         f"there is no user {user_id('nobody')}: a keypair belongs to an existing user"),
        (new_keypair("AKx", "carol"), Code.INVALID, f"user {user_id('carol')[:8]} is deactivated"),
        (new_keypair("AKx", "alice", policy="nope"), Code.NOT_FOUND,
         "there is no keypair resource policy nope"),
    ]  # fmt: skip
    for cmd, code, said in refusals:
        (await w.when(cmd)).rejected(code, said)
    issued = await w.when(new_keypair("AKx", "alice", actor=org.root.actor))
    assert [type(e) for e in issued.events] == [KeypairCreated]


async def test_a_keypair_is_modified_by_an_admin_not_by_its_owner(org: Org) -> None:
    w = org.world
    await w.given(*policies("big"))
    cmd = a.ModifyKeypair(access_key="AKalice", policy="big", rate_limit=10, **by(org.admin1.actor))
    then = await w.when(cmd)
    assert then.accepted(KeypairModified(policy="big", rate_limit=10)) == (
        "keypair AKalice modified"
    )
    assert (await w.when(cmd)).accepted() == "keypair AKalice already had these settings"
    # A keypair's policy sets its quotas: its owner may not choose it.
    (await w.when(cmd.model_copy(update={"actor": org.alice.actor}))).rejected(
        Code.FORBIDDEN, "a user of domain d1 may not change keypair AKalice"
    )
    (await w.when(cmd.model_copy(update={"actor": org.admin2.actor}))).rejected(
        Code.FORBIDDEN, "a admin of domain d2 may not change keypair AKalice"
    )
    (await w.when(cmd.model_copy(update={"policy": "nope"}))).rejected(
        Code.NOT_FOUND, "there is no keypair resource policy nope"
    )
    (await w.when(cmd.model_copy(update={"access_key": "AKnope"}))).rejected(
        Code.NOT_FOUND, "there is no keypair AKnope"
    )


async def test_an_owner_revokes_their_own_keypair_and_only_an_admin_restores_it(
    org: Org,
) -> None:
    w = org.world
    off = a.DeactivateKeypair(access_key="AKalice", reason="leaked", **by(org.alice.actor))
    then = await w.when(off)
    assert then.accepted(KeypairDeactivated(reason="leaked")) == "keypair AKalice deactivated"
    assert w.directory.principal(org.alice.actor) is None
    again = a.DeactivateKeypair(access_key="AKalice", **by(org.admin1.actor))
    assert (await w.when(again)).accepted() == "keypair AKalice was already deactivated"
    # After a login (no keypair of hers signs) she is still herself, but may not restore it.
    (await w.when(a.ReactivateKeypair(access_key="AKalice", **by(org.alice.login)))).rejected(
        Code.FORBIDDEN, "a user of domain d1 may not change keypair AKalice"
    )
    on = a.ReactivateKeypair(access_key="AKalice", **by(org.admin1.actor))
    assert (await w.when(on)).accepted(KeypairReactivated()) == "keypair AKalice reactivated"
    assert (await w.when(on)).accepted() == "keypair AKalice was already active"
    assert w.directory.principal(org.alice.actor) is not None


async def test_nobody_else_revokes_a_keypair_and_a_monitor_not_even_their_own(
    org: Org,
) -> None:
    w = org.world
    refusals = [
        (a.DeactivateKeypair(access_key="AKalice", **by(org.bob.actor)),
         "a user of domain d1 may not change keypair AKalice"),
        (a.DeactivateKeypair(access_key="AKalice", **by(org.admin2.actor)),
         "a admin of domain d2 may not change keypair AKalice"),
        (a.DeactivateKeypair(access_key="AKmona", **by(org.mona.actor)),
         "a monitor of domain d1 may not change keypair AKmona"),
    ]  # fmt: skip
    for cmd, said in refusals:
        (await w.when(cmd)).rejected(Code.FORBIDDEN, said)
    (await w.when(a.DeactivateKeypair(access_key="AKnope", **by()))).rejected(
        Code.NOT_FOUND, "there is no keypair AKnope"
    )


async def test_an_owner_chooses_their_default_keypair_among_active_ones(org: Org) -> None:
    w = org.world
    await w.given(new_keypair("AKa2", "alice"), new_keypair("AKa3", "alice"))
    await w.given(a.DeactivateKeypair(access_key="AKa3", **by()))
    cmd = a.SetDefaultKeypair(access_key="AKa2", **by(org.alice.actor))
    then = await w.when(cmd)
    assert then.accepted(UserDefaultKeypairSet(access_key="AKa2")) == (
        "keypair AKa2 is now the default"
    )
    # Written on the user: the default is an attribute of the person.
    assert then.written_to == [f"user/{org.alice.user_id}"]
    assert (await w.when(cmd)).accepted() == "keypair AKa2 was already the default"
    login = w.directory.principal(org.alice.login)
    assert login is not None and login.access_key == "AKa2"
    (await w.when(a.SetDefaultKeypair(access_key="AKa3", **by(org.alice.actor)))).rejected(
        Code.INVALID, "keypair AKa3 is deactivated"
    )
    (await w.when(a.SetDefaultKeypair(access_key="AKnope", **by()))).rejected(
        Code.NOT_FOUND, "there is no keypair AKnope"
    )
    for person, role in ((org.bob, "user"), (org.mona, "monitor"), (org.admin2, "admin")):
        domain = "d2" if person is org.admin2 else "d1"
        refused = a.SetDefaultKeypair(access_key="AKalice", **by(person.actor))
        (await w.when(refused)).rejected(
            Code.FORBIDDEN,
            f"a {role} of domain {domain} may not choose the default keypair of "
            f"{org.alice.user_id[:8]}",
        )
    by_admin = a.SetDefaultKeypair(access_key="AKalice", **by(org.admin1.actor))
    assert (await w.when(by_admin)).accepted(UserDefaultKeypairSet(access_key="AKalice"))


async def test_a_domain_admin_cannot_issue_change_or_revoke_a_superadmins_keys(org: Org) -> None:
    """root is a superadmin of d1: admin1 administers d1 but cannot grant root's role, so
    cannot hand out, change, revoke or re-point root's keys either. root still can."""
    w = org.world
    said = "a admin of domain d1 may not grant or change the role superadmin"
    admin = org.admin1.actor
    for cmd in (
        new_keypair("AKroot2", "root", actor=admin),
        a.ModifyKeypair(access_key="AKroot", policy="default", rate_limit=1, **by(admin)),
        a.DeactivateKeypair(access_key="AKroot", reason="x", **by(admin)),
        a.ReactivateKeypair(access_key="AKroot", **by(admin)),
        a.SetDefaultKeypair(access_key="AKroot", **by(admin)),
    ):
        (await w.when(cmd)).rejected(Code.FORBIDDEN, said)
    assert "AKroot2" not in w.directory.keypairs
    (await w.when(new_keypair("AKroot2", "root", actor=org.root.actor))).accepted(
        KeypairCreated(user_id=org.root.user_id, domain="d1", secret_key_id="secret-AKroot2")
    )
    (await w.when(a.DeactivateKeypair(access_key="AKroot2", reason="leaked", **by(
        org.root.actor
    )))).accepted(KeypairDeactivated(reason="leaked"))  # fmt: skip
