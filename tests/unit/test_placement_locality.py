"""Placement and image locality, as tables: an image from a registry (``pullable``) may go to a
node that lacks it, but a node that holds it is chosen first whenever one fits (the group's
``image_locality``, on by default); with locality off, the group's selection alone decides; an
image no registry has still waits for a node that holds it; preemption and the head of the
queue follow the same rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from placement import NodeOffer, Placed, SessionRequest, place
from placement.judge import Judge, Verdict
from schemas.session import ClusterMode
from schemas.tenancy import AgentSelection, GroupScheduling
from tests.unit.placement_support import ask, by_session, check, node

GROUP = "gpu-a"
SELECTIONS = [AgentSelection.CONCENTRATED, AgentSelection.DISPERSED, AgentSelection.ROUND_ROBIN]


def decide(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling | None = None
) -> dict[str, str]:
    decisions = place(requests, nodes, policy, group=GROUP)
    check(nodes, requests, decisions)
    return by_session(decisions)


def pullable(session: str, **more: object) -> SessionRequest:
    return replace(ask(session, **more), image="reg/lab:1", pullable=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("selection", SELECTIONS, ids=lambda s: s.value)
def test_a_node_holding_the_image_is_chosen_first(selection: AgentSelection) -> None:
    # Whichever node the selection alone would take, the holder (n2) wins while it fits.
    nodes = [node("n1", cpu=4, images=()), node("n2", cpu=8, images=("reg/lab:1",)),
             node("n3", cpu=16, images=())]  # fmt: skip
    policy = GroupScheduling(agent_selection=selection)

    assert decide(nodes, [pullable("a", cpu=2)], policy) == {"a": "n2"}


def test_a_node_that_must_pull_takes_it_when_no_holder_fits() -> None:
    nodes = [node("n1", cpu=4, images=()), node("n2", cpu=2, images=("reg/lab:1",))]

    assert decide(nodes, [pullable("a", cpu=2), pullable("b", cpu=2)]) == {"a": "n2", "b": "n1"}


def test_without_locality_the_selection_alone_decides() -> None:
    nodes = [node("n1", cpu=16, images=()), node("n2", cpu=8, images=("reg/lab:1",))]
    policy = GroupScheduling(agent_selection=AgentSelection.DISPERSED, image_locality=False)

    assert decide(nodes, [pullable("a", cpu=2)], policy) == {"a": "n1"}  # most free cpu


def test_an_image_no_registry_has_still_waits_for_a_holder() -> None:
    nodes = [node("n1", cpu=16, images=())]
    decisions = place([ask("a", cpu=2, image="local-only:1")], nodes, group=GROUP)

    assert not isinstance(decisions[0], Placed)
    assert "local-only:1" in decisions[0].reason
    assert decide(nodes, [pullable("b", cpu=2)]) == {"b": "n1"}


def test_every_kernel_of_a_multi_node_session_prefers_holders() -> None:
    nodes = [node("n1", cpu=4, images=()), node("n2", cpu=4, images=("reg/lab:1",)),
             node("n3", cpu=4, images=("reg/lab:1",))]  # fmt: skip
    request = pullable("a", cpu=4, kernels=2, mode=ClusterMode.MULTI_NODE)

    (placed,) = place([request], nodes, group=GROUP)

    assert isinstance(placed, Placed)
    assert sorted(placed.placements.values()) == ["n2", "n3"]


def test_the_judge_says_a_pullable_image_fits_a_node_without_it() -> None:
    nodes = [node("n1", cpu=4, images=())]
    judge = Judge(nodes, GroupScheduling(), group=GROUP)

    assert judge.judge(pullable("a", cpu=2)).verdict is Verdict.FITS
    assert judge.judge(ask("b", cpu=2, image="reg/lab:1")).verdict is Verdict.NEVER


def test_a_pullable_session_with_folders_goes_where_its_volume_is() -> None:
    nodes = [node("n1", cpu=16, images=("reg/lab:1",)), node("n2", cpu=4, images=(),
             volumes=("local",))]  # fmt: skip

    assert decide(nodes, [pullable("a", cpu=2, volumes=("local",))]) == {"a": "n2"}
