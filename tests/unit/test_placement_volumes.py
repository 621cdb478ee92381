"""Placement and folders' volumes, as tables: a session whose folders lie on volumes goes only
to nodes that have them all (every kernel, for multi-node), the reason names the volume no
node has, a session without folders is placed exactly as before, and neither the head of the
queue's rules nor preemption pick a node without the volumes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from placement import NodeOffer, Placed, Placer, SessionRequest, place
from placement.preemption import Holding, Policy, Running, choose_victims
from schemas.session import ClusterMode
from schemas.tenancy import AgentSelection, GroupScheduling, HeadOfLine
from tests.unit.placement_support import ask, by_session, check, node, slots

GROUP = "gpu-a"
SELECTIONS = [AgentSelection.CONCENTRATED, AgentSelection.DISPERSED, AgentSelection.ROUND_ROBIN]


def decide(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling | None = None
) -> dict[str, str]:
    decisions = place(requests, nodes, policy, group=GROUP)
    check(nodes, requests, decisions)
    return by_session(decisions)


@pytest.mark.parametrize("selection", SELECTIONS, ids=lambda s: s.value)
def test_a_node_without_the_volume_is_skipped(selection: AgentSelection) -> None:
    # n1 and n3 would be chosen first by one policy or another: more free, less free, first.
    nodes = [
        node("n1", cpu=4),
        node("n2", cpu=8, volumes=("local",)),
        node("n3", cpu=16, volumes=("shared",)),
    ]
    requests = [ask("a", cpu=2, volumes=("local",)), ask("b", cpu=2, volumes=("local",))]

    assert decide(nodes, requests, GroupScheduling(agent_selection=selection)) == {
        "a": "n2",
        "b": "n2",
    }


def test_every_volume_must_be_on_the_node() -> None:
    nodes = [
        node("n1", volumes=("local",)),
        node("n2", volumes=("shared",)),
        node("n3", volumes=("local", "scratch", "shared")),
    ]
    requests = [ask("a", volumes=("local", "shared"))]

    assert decide(nodes, requests) == {"a": "n3"}


def test_every_kernel_of_a_multi_node_session_goes_where_the_volume_is() -> None:
    nodes = [node("n1", cpu=8), node("n2", cpu=4, volumes=("local",)),
             node("n3", cpu=4, volumes=("local",))]  # fmt: skip
    request = ask("a", cpu=4, kernels=2, mode=ClusterMode.MULTI_NODE, volumes=("local",))

    decisions = place([request], nodes, group=GROUP)

    (placed,) = decisions
    assert isinstance(placed, Placed)
    assert sorted(placed.placements.values()) == ["n2", "n3"]


@pytest.mark.parametrize(
    ("nodes", "request_", "reason"),
    [
        (
            [node("n1"), node("n2", volumes=("shared",))],
            ask("a", volumes=("local",)),
            "no available node in group gpu-a has volume local (the session mounts a folder on it)",
        ),
        (
            [node("n1", volumes=("local",), available=False), node("n2")],
            ask("a", volumes=("local",)),
            "no available node in group gpu-a has volume local (the session mounts a folder on it)",
        ),
        (
            [node("n1", volumes=("local",)), node("n2")],
            ask("a", volumes=("local", "nfs")),
            "no available node in group gpu-a has volume nfs (the session mounts a folder on it)",
        ),
        (
            [node("n1", volumes=("local",)), node("n2", volumes=("nfs",))],
            ask("a", volumes=("nfs", "local")),
            "no available node in group gpu-a has volumes local and nfs together",
        ),
        (
            [node("n1", volumes=("local",)), node("n2", images=("other",))],
            ask("a", image="other", volumes=("local",)),
            "image other is on no available node in group gpu-a with volume local",
        ),
        (
            # Only the nodes with the volume count: n2 is idle and large, but has no volume.
            [node("n1", cpu=8, used_cpu=7, volumes=("local",)), node("n2", cpu=64)],
            ask("a", cpu=4, volumes=("local",)),
            "no node in group gpu-a has 4 CPUs free (largest free: 1 CPU on n1)",
        ),
        (
            [node("n1", cpu=2, volumes=("local",)), node("n2", cpu=64)],
            ask("a", cpu=4, volumes=("local",)),
            "no node in group gpu-a has 4 CPUs even when idle (largest: 2 CPUs on n1)",
        ),
    ],
    ids=[
        "no node has it",
        "only a cordoned node has it",
        "one of two volumes is nowhere",
        "two volumes on different nodes",
        "the image is not where the volume is",
        "busy where the volume is",
        "too small where the volume is",
    ],
)
def test_the_reason_names_the_missing_volume(
    nodes: list[NodeOffer], request_: SessionRequest, reason: str
) -> None:
    assert decide(nodes, [request_]) == {"a": f"wait: {reason}"}


def test_a_session_without_folders_is_placed_as_before() -> None:
    """Nodes with volumes or without: the same decisions for sessions that mount nothing."""
    plain = [node(f"n{i}", cpu=8, gpus=2) for i in range(6)]
    with_volumes = [
        replace(offer, volumes=frozenset({"local"} if i % 2 else set()))
        for i, offer in enumerate(plain)
    ]
    requests = [ask(f"s{i}", cpu=1 + i % 3, gpu=(0, 0.5, 1)[i % 3], order=i) for i in range(30)]
    for selection in SELECTIONS:
        policy = GroupScheduling(agent_selection=selection)
        before = Placer().place(requests, plain, policy, group=GROUP)
        after = Placer().place(requests, with_volumes, policy, group=GROUP)
        assert after == before


def test_a_head_whose_volume_no_node_has_does_not_block() -> None:
    nodes = [node("n1", cpu=4)]
    requests = [ask("head", cpu=1, order=0, volumes=("local",)), ask("next", cpu=1, order=1)]

    decisions = decide(nodes, requests, GroupScheduling(head_of_line=HeadOfLine.BLOCK))

    assert decisions["next"] == "n1"


def test_a_starving_head_reserves_only_a_node_with_its_volume() -> None:
    # n1 is closer to fitting (2 free), but only n2 has the volume.
    nodes = [node("n1", cpu=8, used_cpu=6), node("n2", cpu=8, used_cpu=7, volumes=("local",))]
    requests = [ask("head", cpu=4, order=0, volumes=("local",)), ask("small", cpu=1, order=1)]

    decisions = decide(nodes, requests, GroupScheduling(starvation_after_s=0))

    assert decisions == {
        "head": "wait: no node in group gpu-a has 4 CPUs free (largest free: 1 CPU on n2); "
        "node n2 is reserved for it",
        "small": "n1",
    }


def test_preemption_stops_nobody_on_a_node_without_the_volume() -> None:
    offers = [node("n1", cpu=8, used_cpu=8), node("n2", cpu=8, used_cpu=8, volumes=("local",))]
    held = [
        Running("young", 5, "d", 100.0, (Holding("n1", slots(4, 1)),)),
        Running("old", 5, "d", 1.0, (Holding("n2", slots(4, 1)),)),
    ]
    want = ask("want", cpu=4, priority=10, volumes=("local",))

    chosen = choose_victims(want, "d", offers, held, Policy())

    assert chosen is not None and (chosen.node_id, chosen.victims) == ("n2", ("old",))
    nowhere = ask("want", cpu=4, priority=10, volumes=("nfs",))
    assert choose_victims(nowhere, "d", offers, held, Policy()) is None
