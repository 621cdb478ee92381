"""Deciding tenancy commands through the unit of work on an in-memory store: every tenancy
command has a decider, who asks is resolved from the directory, and a decision that lost a
race (another writer stored on the same aggregate after the fold) or whose answer was lost is
decided again on the refreshed directory."""

from __future__ import annotations

import pytest

from commands import admin as a
from commands.messages import REGISTRY, Command
from commands.outcome import Accepted, Code
from commands.unit_of_work import TooManyConflictsError, working_copy
from events.domain.tenancy import DomainCreated, DomainModified
from events.envelope import Cause
from events.writes import Write
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.tenancy import Role, SlotLimits
from services.tenancy.routes import DECIDERS
from tests.unit.scenario import T0
from tests.unit.tenancy.support import Org, World, by, new_keypair, new_user, user_id

GPU2 = SlotLimits(gpu_hundredths=200)


def test_every_tenancy_command_has_a_decider() -> None:
    registered = {cls for (kind, _), cls in REGISTRY.items() if kind in a.ADMIN_AGGREGATES}
    defined = {
        value
        for value in vars(a).values()
        if isinstance(value, type)
        and issubclass(value, Command)
        and value.__module__.startswith(f"{a.__name__}.")
    }
    assert len(registered) == 40
    assert set(DECIDERS) == registered == defined


async def test_who_asks_is_resolved_from_the_directory(org: Org) -> None:
    w = org.world
    for actor in (Actor(kind=ActorKind.KEYPAIR, id="AKnope"), Actor(kind=ActorKind.USER, id="u")):
        (await w.when(a.CreateDomain(name="d3", **by(actor)))).rejected(
            Code.FORBIDDEN, f"{actor.kind.value} {actor.id} is unknown or deactivated"
        )
    # A person after a login (a user actor) is as much themselves as with a keypair.
    (await w.when(a.CreateDomain(name="d3", **by(org.admin1.login)))).rejected(
        Code.FORBIDDEN, "a admin of domain d1 may not create domains"
    )
    (await w.when(a.CreateDomain(name="d3", **by(org.root.login)))).accepted(DomainCreated())


async def test_a_create_that_lost_the_race_is_answered_as_a_conflict(org: Org) -> None:
    w = org.world
    other = w.replica()
    await w.given(a.CreateDomain(name="d3", description="first", **by()))
    commits = w.store.commits
    then = await other.when(a.CreateDomain(name="d3", description="second", **by()))
    then.rejected(Code.CONFLICT, "domain d3 already exists")
    assert w.store.commits == commits
    assert other.directory.domains["d3"].description == "first"  # refreshed from the store


async def test_the_same_create_on_another_writer_is_done_not_a_conflict(org: Org) -> None:
    w = org.world
    other = w.replica()
    cmd = a.CreateDomain(name="d3", **by())
    await w.given(cmd)
    then = await other.when(cmd)  # a redelivery that another replica picked up
    assert then.accepted() == "domain d3 was created by this command already"


async def deactivated_elsewhere(w: World, domain_name: str) -> None:
    """Another writer stores an event on the domain that ``w`` has not folded."""
    domain = working_copy(w.directory.domains[domain_name])
    assert domain is not None and domain.deactivate("elsewhere", T0)
    actor = Actor.service("elsewhere")
    cause = Cause(causation_id="x", correlation_id="x", actor=actor, tenant=SYSTEM_TENANT)
    guard = w.directory.guard(domain.ref)
    await w.store.commit([Write(domain.ref, guard, tuple(domain.collect(cause)))])
    assert w.directory.domains[domain_name].active


async def test_a_repeat_of_a_change_stored_elsewhere_is_found_after_the_conflict(
    org: Org,
) -> None:
    w = org.world
    await deactivated_elsewhere(w, "d1")
    then = await w.when(a.DeactivateDomain(name="d1", **by()))
    assert then.accepted() == "domain d1 was already deactivated"
    assert not w.directory.domains["d1"].active


async def test_a_change_that_raced_another_is_stored_after_it(org: Org) -> None:
    w = org.world
    await deactivated_elsewhere(w, "d1")
    modify = a.ModifyDomain(name="d1", description="x", total_resource_slots=GPU2, **by())
    then = await w.when(modify)
    assert then.accepted(DomainModified(description="x", total_resource_slots=GPU2))
    assert then.stored[0].envelope.aggregate_version == 3  # created, deactivated, modified
    domain = w.directory.domains["d1"]
    assert (domain.active, domain.description) == (False, "x")


async def test_a_keypair_raced_by_its_users_deactivation_is_refused(org: Org) -> None:
    w = org.world
    await w.given(new_user("carol"))
    other = w.replica()
    await w.given(a.DeactivateUser(user_id=user_id("carol"), **by()))
    # The first keypair also writes the user (their default): that guard no longer holds.
    then = await other.when(new_keypair("AKc1", "carol"))
    then.rejected(Code.INVALID, f"user {user_id('carol')[:8]} is deactivated")
    assert "AKc1" not in other.directory.keypairs


async def test_a_change_raced_by_a_promotion_is_decided_again_and_refused(org: Org) -> None:
    w = org.world
    other = w.replica()
    promote = a.ModifyUser(
        user_id=org.alice.user_id, role=Role.SUPERADMIN, policy="default", **by(org.root.actor)
    )
    await w.given(promote)
    then = await other.when(a.DeactivateUser(user_id=org.alice.user_id, **by(org.admin1.actor)))
    then.rejected(
        Code.FORBIDDEN, "a admin of domain d1 may not grant or change the role superadmin"
    )
    assert other.directory.users[org.alice.user_id].role is Role.SUPERADMIN


@pytest.mark.parametrize("stored", [True, False])
async def test_a_create_whose_answer_was_lost_is_stored_once(org: Org, stored: bool) -> None:
    w = org.world
    before = await w.store.stream_last_seq()
    w.store.fail_next(stored=stored)
    then = await w.when(a.CreateDomain(name="d3", **by()))
    assert [e.name for e in w.store.events(after_seq=before)] == ["DomainCreated"]
    if stored:  # read back and decided again: its own create, recognised (no new seqs)
        assert isinstance(then.decision, Accepted) and then.decision.event_seqs == ()
        assert then.decision.message == "domain d3 was created by this command already"
    else:  # nothing stored: decided again and stored
        assert then.accepted(DomainCreated()) == "domain d3 created"
    assert "d3" in w.directory.domains


async def test_a_writer_that_keeps_losing_gives_up_and_stores_nothing(org: Org) -> None:
    w = org.world
    other = w.replica(attempts=1)
    await w.given(a.ModifyDomain(name="d1", description="a", total_resource_slots=GPU2, **by()))
    last = await w.store.stream_last_seq()
    with pytest.raises(TooManyConflictsError, match="kept conflicting"):
        await other.decider.decide(a.DeactivateDomain(name="d1", **by()), lambda: T0)
    assert await w.store.stream_last_seq() == last
