"""Agent selection over small clusters: concentrated, dispersed, round-robin, and requests
without GPUs keeping off nodes whose GPUs they do not need."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from placement import NodeOffer, Placer, SessionRequest, place
from schemas.tenancy import AgentSelection, GroupScheduling
from tests.unit.placement_support import ask, by_session, check, node

CONCENTRATED = AgentSelection.CONCENTRATED
DISPERSED = AgentSelection.DISPERSED
ROUND_ROBIN = AgentSelection.ROUND_ROBIN


@dataclass(frozen=True)
class Case:
    selection: AgentSelection
    nodes: list[NodeOffer]
    requests: list[SessionRequest]
    expected: list[str]
    """The node each request lands on, in request order."""


def asks(*gpus: float, cpu: float = 1) -> list[SessionRequest]:
    return [ask(f"s{i}", cpu=cpu, gpu=g, order=i) for i, g in enumerate(gpus)]


MIXED = [node("n1", gpus=4), node("n2", gpus=2, whole=[0]), node("n3", gpus=2, whole=[0])]

CASES = {
    "concentrated: fewest free gpus that fit, then node id": Case(
        CONCENTRATED, MIXED, asks(1, 1, 2), ["n2", "n3", "n1"]
    ),
    "dispersed: most free gpus first": Case(DISPERSED, MIXED, asks(1, 1, 1), ["n1", "n1", "n1"]),
    "dispersed: spreads once the big node is no roomier": Case(
        DISPERSED, MIXED, asks(1, 1, 1, 1), ["n1", "n1", "n1", "n2"]
    ),
    "round-robin: the next node after the last chosen": Case(
        ROUND_ROBIN, MIXED, asks(1, 1, 1, 1), ["n1", "n2", "n3", "n1"]
    ),
    "round-robin: skips nodes that do not fit": Case(
        ROUND_ROBIN, MIXED, asks(2, 1, 2), ["n1", "n2", "n1"]
    ),
    "concentrated: equal gpus, least free cpu": Case(
        CONCENTRATED,
        [node("a", cpu=8, gpus=1), node("b", cpu=8, gpus=1, used_cpu=4)],
        asks(1),
        ["b"],
    ),
    "dispersed: equal gpus, most free cpu": Case(
        DISPERSED,
        [node("a", cpu=8, gpus=1, used_cpu=4), node("b", cpu=8, gpus=1)],
        asks(1),
        ["b"],
    ),
    "dispersed: equal everything, smallest node id": Case(
        DISPERSED, [node("b", gpus=1), node("a", gpus=1)], asks(1), ["a"]
    ),
    "concentrated shares: the node whose device fits most tightly": Case(
        CONCENTRATED,
        [node("a", gpus=1), node("b", gpus=1, shared={0: 60}), node("c", gpus=1, shared={0: 20})],
        asks(0.3),
        ["b"],
    ),
    "dispersed shares: the node with the most room": Case(
        DISPERSED,
        [node("a", gpus=1, shared={0: 10}), node("b", gpus=2, shared={0: 60}), node("c")],
        asks(0.3),
        ["b"],
    ),
}

for selection in AgentSelection:
    CASES[f"{selection}: no gpu asked, a node without free gpus first"] = Case(
        selection,
        [node("gpu-a", gpus=8), node("gpu-b", gpus=2, whole=[0, 1]), node("gpu-c", gpus=1)],
        asks(0, 0),
        ["gpu-b", "gpu-b"],
    )
    CASES[f"{selection}: no gpu asked, then the fewest free gpus"] = Case(
        selection, [node("big", gpus=8), node("small", gpus=1)], asks(0), ["small"]
    )


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_selection(case: Case) -> None:
    decisions = place(case.requests, case.nodes, GroupScheduling(agent_selection=case.selection))
    check(case.nodes, case.requests, decisions)
    assert [by_session(decisions)[r.session_id] for r in case.requests] == case.expected


def test_round_robin_cursor_persists_across_passes() -> None:
    nodes = [node(f"n{i}") for i in range(1, 4)]
    policy = GroupScheduling(agent_selection=ROUND_ROBIN)
    placer = Placer()
    seen = []
    for p in range(4):
        decisions = placer.place([ask(f"p{p}")], nodes, policy, group="g")
        seen.append(by_session(decisions)[f"p{p}"])
    assert seen == ["n1", "n2", "n3", "n1"]


def test_round_robin_cursor_survives_its_node_leaving() -> None:
    policy = GroupScheduling(agent_selection=ROUND_ROBIN)
    placer = Placer()
    placer.place([ask("a")], [node("n1"), node("n2"), node("n3")], policy, group="g")
    placer.place([ask("b")], [node("n1"), node("n2"), node("n3")], policy, group="g")
    # n2 (the last chosen) is gone: the next after where it was is n3.
    decisions = placer.place([ask("c")], [node("n1"), node("n3")], policy, group="g")
    assert by_session(decisions) == {"c": "n3"}


def test_a_failed_multi_node_session_does_not_move_the_cursor() -> None:
    from schemas.session import ClusterMode

    policy = GroupScheduling(agent_selection=ROUND_ROBIN)
    nodes = [node("n1", gpus=1), node("n2", gpus=1), node("n3", gpus=1)]
    placer = Placer()
    multi = ask("m", gpu=1, kernels=4, mode=ClusterMode.MULTI_NODE, order=1)
    decisions = placer.place([multi, ask("after", gpu=1, order=2)], nodes, policy, group="g")
    assert by_session(decisions)["after"] == "n1"
