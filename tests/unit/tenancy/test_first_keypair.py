"""A user created with their first keypair: both aggregates and the default written in one
commit, or nothing at all (a keypair policy unknown, an access key taken)."""

from __future__ import annotations

from commands import admin as a
from commands.outcome import Code
from events.domain.tenancy import KeypairCreated, UserCreated, UserDefaultKeypairSet
from schemas.tenancy import Role
from tests.unit.tenancy.support import PID1, Org, by, digest, new_keypair, new_user, user_id


def first(access_key: str, policy: str = "default") -> a.FirstKeypair:
    return a.FirstKeypair(
        access_key=access_key, secret_key_id=f"secret-{access_key}", policy=policy
    )


async def test_a_user_and_their_first_keypair_are_one_commit(org: Org) -> None:
    w = org.world
    commits = w.store.commits
    then = await w.when(new_user("erin", projects=(PID1,), keypair=first("AKe1")))
    created = UserCreated(
        domain="d1",
        role=Role.USER,
        email_digest=digest("erin"),
        email_sealed="sealed-erin",
        policy="default",
        projects=(PID1,),
    )
    keypair = KeypairCreated(user_id=user_id("erin"), domain="d1", secret_key_id="secret-AKe1")
    message = then.accepted(created, UserDefaultKeypairSet(access_key="AKe1"), keypair)
    assert message == (
        f"user {user_id('erin')[:8]} created in domain d1, with keypair AKe1 (their default)"
    )
    assert w.store.commits == commits + 1
    assert w.directory.users[user_id("erin")].default_access_key == "AKe1"
    assert w.directory.keypairs["AKe1"].active


async def test_a_refused_first_keypair_creates_no_user(org: Org) -> None:
    w = org.world
    await w.given(new_user("carol"), new_keypair("AKtaken", "carol"))
    (await w.when(new_user("erin", keypair=first("AKtaken")))).rejected(
        Code.CONFLICT, "keypair AKtaken already exists"
    )
    (await w.when(new_user("erin", keypair=first("AKe2", policy="nope")))).rejected(
        Code.NOT_FOUND, "keypair resource policy nope"
    )
    assert user_id("erin") not in w.directory.users


async def test_a_keypair_issued_while_the_default_is_deactivated_becomes_the_default(
    org: Org,
) -> None:
    w = org.world
    await w.given(new_user("erin", keypair=first("AKe1")))
    await w.given(a.DeactivateKeypair(access_key="AKe1", reason="leaked", **by()))
    then = await w.when(new_keypair("AKe2", "erin"))
    assert [type(e) for e in then.events] == [KeypairCreated, UserDefaultKeypairSet]
    assert w.directory.users[user_id("erin")].default_access_key == "AKe2"
