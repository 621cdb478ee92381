"""Fair-share shares of domains, projects and users: given at creation or by a change (a change
that names none keeps it), stored in the events, folded by the directory, refused out of bounds,
and 1 for everything stored before shares existed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from commands import admin as a
from events.catalogue import CATALOGUE
from events.domain.tenancy import (
    DomainCreated,
    DomainModified,
    ProjectModified,
    UserCreated,
    UserModified,
)
from events.envelope import Envelope
from schemas.tenancy import Role, SlotLimits, project_id_for
from tests.unit.tenancy.support import PID1, Org, by, new_user, user_id


async def test_a_domain_is_given_a_share_and_a_change_that_names_none_keeps_it(org: Org) -> None:
    w = org.world
    then = await w.when(a.CreateDomain(name="d3", fair_share=4, **by()))
    assert then.accepted(DomainCreated(fair_share=4)) == "domain d3 created"
    assert w.directory.domains["d3"].fair_share == 4
    kept = await w.when(
        a.ModifyDomain(name="d3", description="x", total_resource_slots=SlotLimits(), **by())
    )
    kept.accepted(DomainModified(description="x", total_resource_slots=SlotLimits(), fair_share=4))
    changed = await w.when(
        a.ModifyDomain(
            name="d3", description="x", total_resource_slots=SlotLimits(), fair_share=2, **by()
        )
    )
    changed.accepted(
        DomainModified(description="x", total_resource_slots=SlotLimits(), fair_share=2)
    )
    assert w.directory.domains["d3"].fair_share == 2
    same = a.ModifyDomain(
        name="d3", description="x", total_resource_slots=SlotLimits(), fair_share=2, **by()
    )
    assert (await w.when(same)).accepted() == "domain d3 already had these settings"


async def test_a_project_and_a_user_are_given_shares(org: Org) -> None:
    w = org.world
    project = a.ModifyProject(
        project_id=PID1, description="", total_resource_slots=SlotLimits(), policy="default",
        fair_share=3, **by(),
    )  # fmt: skip
    (await w.when(project)).accepted(
        ProjectModified(
            description="", total_resource_slots=SlotLimits(), policy="default", fair_share=3
        )
    )
    assert w.directory.projects[PID1].fair_share == 3
    assert w.directory.projects[project_id_for("d2", "ml")].fair_share == 1
    then = await w.when(new_user("carol", projects=(PID1,), fair_share=5))
    created = then.events[0]
    assert isinstance(created, UserCreated) and created.fair_share == 5
    carol = user_id("carol")
    assert w.directory.users[carol].fair_share == 5
    change = a.ModifyUser(user_id=carol, role=Role.USER, policy="default", fair_share=7, **by())
    (await w.when(change)).accepted(UserModified(role=Role.USER, policy="default", fair_share=7))
    keep = a.ModifyUser(user_id=carol, role=Role.ADMIN, policy="default", **by())
    (await w.when(keep)).accepted(UserModified(role=Role.ADMIN, policy="default", fair_share=7))


@pytest.mark.parametrize("share", [0, -1, 10_001, 1 << 40])
def test_a_share_out_of_bounds_is_refused_at_the_edge(share: int) -> None:
    with pytest.raises(ValidationError, match="fair_share"):
        a.CreateDomain(name="d9", fair_share=share, **by())
    with pytest.raises(ValidationError, match="fair_share"):
        a.ModifyUser(user_id="u", role=Role.USER, policy="default", fair_share=share, **by())


def test_events_stored_before_shares_load_with_a_share_of_one() -> None:
    stored = (
        '{"event_id":"e1","name":"UserModified","schema_version":1,"aggregate_type":"user",'
        '"aggregate_id":"u1","aggregate_version":2,"occurred_at":"2026-11-21T12:00:00Z",'
        '"causation_id":"c","correlation_id":"c","actor":{"kind":"service","id":"tests"},'
        '"tenant":{"domain":"default","project":null},"payload":{"role":"user","policy":"p"}}'
    )
    event = CATALOGUE.decode(Envelope.model_validate_json(stored))
    assert event == UserModified(role=Role.USER, policy="p", fair_share=1)
