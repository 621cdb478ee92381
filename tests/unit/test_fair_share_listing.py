"""The gateway's ``fairShare`` listing: the scheduler's rule over the usage view's intervals
gives the worked example's numbers (``test_fair_share``), and each caller sees only the lines
their role may read."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from commands.authorisation import Principal
from projections.usage.tables import KernelInterval
from schemas.fair_share import FairShareSettings
from schemas.tenancy import GroupScheduling, QueuePolicy, Role
from services.gateway.usage.fair_share import UnknownGroupError, fair_share_lines
from tests.unit.placement_support import slots
from tests.unit.scenario import T0

H = 86_400
SETTINGS = FairShareSettings(usage_half_life_s=H)


def interval(kernel: str, user: str, gpus: int, *, seconds: float = H) -> KernelInterval:
    return KernelInterval(
        kernel_id=kernel, session_id=f"s-{kernel}", node_id="n1", session_name=None,
        user_id=user, project_id="vision", domain="lab", resource_group="g",
        slots=slots(gpu=gpus), devices=(), allocated_at=T0, started_at=T0,
        ended_at=T0 + timedelta(seconds=seconds), end_reason="exited", last_seq=1,
    )  # fmt: skip


class Usage:
    async def held_since(self, resource_group: str, since: object) -> list[KernelInterval]:
        assert resource_group == "g"
        return [interval("a1", "alice", 4), interval("b1", "bob", 2)]

    async def waiting_owners(self, resource_group: str) -> set[tuple[str, str, str]]:
        return {("lab", "vision", "alice"), ("lab", "vision", "bob")}


def services() -> Any:
    node = SimpleNamespace(
        resource_group="g", cordoned=False, lost=False, capacity=slots(cpu=16, mem=16, gpu=8)
    )

    async def nodes() -> list[Any]:
        return [node]

    group = GroupScheduling(queue_policy=QueuePolicy.FAIR_SHARE, fair_share=SETTINGS)
    directory = SimpleNamespace(
        groups={}, group_scheduling=lambda name: group, fair_share=lambda level, key: 1
    )
    return SimpleNamespace(directory=directory, views=SimpleNamespace(usage=Usage(), nodes=nodes))


def person(role: Role, user: str = "alice", domain: str = "lab") -> Principal:
    return Principal(user, role, domain, frozenset({"vision"}), None)


async def test_the_listing_gives_the_worked_examples_numbers() -> None:
    now = T0 + timedelta(seconds=H)
    lines = await fair_share_lines(services(), person(Role.SUPERADMIN), "g", now)
    found = {(x.level, x.user_id or x.project_id or x.domain): x.standing for x in lines}
    assert [x.level for x in lines] == ["domain", "project", "user", "user"]
    assert found[("user", "alice")].usage_norm == pytest.approx(0.2)
    assert found[("user", "alice")].factor == pytest.approx(2**-0.4)
    assert found[("user", "bob")].factor == pytest.approx(2**-0.2)
    assert found[("project", "vision")].factor == pytest.approx(2**-0.3)
    assert found[("domain", "lab")].share == 1


async def test_a_user_sees_their_own_lines_and_an_outsider_none() -> None:
    now = T0 + timedelta(seconds=H)
    mine = await fair_share_lines(services(), person(Role.USER), "g", now)
    assert [(x.level, x.user_id) for x in mine] == [
        ("domain", None),
        ("project", None),
        ("user", "alice"),
    ]
    admin = await fair_share_lines(services(), person(Role.ADMIN, "root"), "g", now)
    assert len(admin) == 4
    assert await fair_share_lines(services(), person(Role.ADMIN, "x", "zoo"), "g", now) == []


async def test_a_group_neither_created_nor_named_by_a_node_is_refused() -> None:
    with pytest.raises(UnknownGroupError):
        await fair_share_lines(services(), person(Role.SUPERADMIN), "nope", T0)
