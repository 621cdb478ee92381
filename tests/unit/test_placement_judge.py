"""The judge (``placement.judge``) against the scheduler's own decisions, over random clusters,
requests and group policies: "fits now" exactly when a pass places the request first in line
(on the same nodes, with the same reason when not); of those that do not fit now, "never"
exactly when a pass cannot place them even on the group with nothing running; and a judge
asked about many requests answers each as if asked about it alone."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings

from placement import NodeOffer, Placed, Placer, SessionRequest, Waiting
from placement.judge import Judge, Verdict, judge
from schemas.session import ClusterMode
from schemas.tenancy import GroupScheduling
from tests.unit.placement_strategies import NO_STARVING, clusters, policies, streams
from tests.unit.placement_support import ask, node


def _first_in_line(request: SessionRequest) -> SessionRequest:
    return replace(request, waiting_since=0.0)


def _idle(nodes: list[NodeOffer]) -> list[NodeOffer]:
    """The same group with nothing running: every node's whole capacity free."""
    return [
        replace(
            n,
            free=n.capacity,
            devices=tuple(replace(d, whole=False, shared=0) for d in n.devices),
        )
        for n in nodes
    ]


def _calm(policy: GroupScheduling) -> GroupScheduling:
    # No reservation for a starving head: the judge asks about a request alone, now.
    return policy.model_copy(update={"starvation_after_s": NO_STARVING})


@settings(max_examples=120, deadline=None)
@given(clusters(), streams(), policies)
def test_fits_now_exactly_when_a_pass_places_it_first_in_line(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling
) -> None:
    policy = _calm(policy)
    names = {n.node_id: n.name for n in nodes}
    for request in map(_first_in_line, requests):
        (decision,) = Placer().place([request], nodes, policy, group="g")
        said = judge(request, nodes, policy, group="g")
        if isinstance(decision, Placed):
            assert said.verdict is Verdict.FITS
            where = [names[k.node_id] for k in decision.kernels.values()]
            assert said.nodes == tuple(dict.fromkeys(where))
            assert said.reason == ""
        else:
            assert isinstance(decision, Waiting)
            assert said.verdict is not Verdict.FITS
            assert said.reason == decision.reason


@settings(max_examples=120, deadline=None)
@given(clusters(), streams(), policies)
def test_never_exactly_when_a_pass_cannot_place_it_on_the_idle_group(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling
) -> None:
    policy = _calm(policy)
    idle = _idle(nodes)
    for request in map(_first_in_line, requests):
        said = judge(request, nodes, policy, group="g")
        if said.verdict is Verdict.FITS:
            # Placement is greedy, so not monotone: a request may fit the busy group now and
            # not the idle one (a 2-GPU kernel takes the shareable GPU its 0.1 sibling needed).
            continue
        (on_idle,) = Placer().place([request], idle, policy, group="g")
        if said.verdict is Verdict.NEVER:
            assert isinstance(on_idle, Waiting)
        else:
            assert isinstance(on_idle, Placed), (said, on_idle)


@settings(max_examples=80, deadline=None)
@given(clusters(), streams(), policies)
def test_one_judge_answers_each_request_as_if_alone(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling
) -> None:
    policy = _calm(policy)
    many = Judge(nodes, policy, group="g")
    for request in requests:
        assert many.judge(request) == judge(request, nodes, policy, group="g")


def test_a_request_larger_than_every_node_is_never_and_says_so() -> None:
    # The user's case: 8 CPUs asked of a 2-core machine with 1.5 cores free.
    nodes = [node("box", cpu=2, mem=8, used_cpu=0.5)]
    said = judge(ask("s", cpu=8), nodes, group="default")
    assert said.verdict is Verdict.NEVER
    assert (
        said.reason == "no node in group default has 8 CPUs even when idle (largest: 2 CPUs on box)"
    )


def test_two_kernels_that_fit_one_node_each_but_not_together_never_fit() -> None:
    # Each 4-GPU kernel of a multi-node session fits the one 4-GPU node alone; both never do.
    nodes = [node("big", gpus=4), node("small", gpus=2)]
    request = ask("s", gpu=4, kernels=2, mode=ClusterMode.MULTI_NODE)
    assert judge(request, nodes).verdict is Verdict.NEVER
    assert judge(request, [*nodes, node("big2", gpus=4)]).verdict is Verdict.FITS
