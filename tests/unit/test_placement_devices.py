"""Device-level allocation: whole devices and shares, FILL and EVENLY, the fragmentation
guard, NUMA, MIG, and cluster sessions placed all or none."""

from __future__ import annotations

import pytest

from placement import NodeOffer, Placed, SessionRequest, Waiting, place
from schemas.session import ClusterMode
from schemas.tenancy import DeviceFill, GroupScheduling
from tests.unit.placement_support import ask, by_session, check, devices_of, node

GUARD_OFF = GroupScheduling(fragmentation_guard=False)
EVENLY = GroupScheduling(device_fill=DeviceFill.EVENLY)


def run(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling | None = None
) -> list[Placed | Waiting]:
    decisions = place(requests, nodes, policy or GroupScheduling(), group="g")
    check(nodes, requests, decisions)
    return decisions


def test_four_quarter_gpus_share_one_device() -> None:
    decisions = run([node("n1", gpus=2)], [ask(f"q{i}", gpu=0.25, order=i) for i in range(4)])
    assert [devices_of(d) for d in decisions] == [[[(0, 25, False)]]] * 4


def test_a_fifth_quarter_opens_the_next_device() -> None:
    decisions = run([node("n1", gpus=2)], [ask(f"q{i}", gpu=0.25, order=i) for i in range(5)])
    assert devices_of(decisions[4]) == [[(1, 25, False)]]


def test_guard_on_refuses_a_share_split_over_devices() -> None:
    nodes = [node("n1", gpus=2, shared={0: 50, 1: 50})]
    [decision] = run(nodes, [ask("a", gpu=0.6)])
    assert isinstance(decision, Waiting)
    assert decision.reason == (
        "fragmentation: 0.6 GPU is free only split across devices (fragmentation guard on)"
    )


def test_guard_off_splits_a_share_over_devices() -> None:
    nodes = [node("n1", gpus=2, shared={0: 50, 1: 50})]
    [decision] = run(nodes, [ask("a", gpu=0.6)], GUARD_OFF)
    assert devices_of(decision) == [[(0, 50, False), (1, 10, False)]]


def test_guard_off_still_prefers_one_device_anywhere_over_a_split() -> None:
    nodes = [node("n1", gpus=2, shared={0: 50, 1: 50}), node("n2", gpus=1, shared={0: 30})]
    [decision] = run(nodes, [ask("a", gpu=0.6)], GUARD_OFF)
    assert by_session([decision]) == {"a": "n2"}
    assert devices_of(decision) == [[(0, 60, False)]]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (GroupScheduling(), [[(2, 20, False)]]),  # FILL: the fullest device that fits
        (EVENLY, [[(1, 20, False)]]),  # EVENLY: the emptiest
    ],
    ids=["fill", "evenly"],
)
def test_fill_and_evenly_choose_the_device(
    policy: GroupScheduling, expected: list[list[tuple[int, int, bool]]]
) -> None:
    nodes = [node("n1", gpus=3, shared={0: 50, 2: 80})]
    [decision] = run(nodes, [ask("a", gpu=0.2)], policy)
    assert devices_of(decision) == expected


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (GroupScheduling(), [[(0, 60, False), (1, 90, False)]]),
        (EVENLY, [[(1, 75, False), (2, 75, False)]]),
    ],
    ids=["fill", "evenly"],
)
def test_a_share_over_one_gpu_takes_the_fewest_devices(
    policy: GroupScheduling, expected: list[list[tuple[int, int, bool]]]
) -> None:
    nodes = [node("n1", gpus=3, shared={0: 40})]
    [decision] = run(nodes, [ask("a", gpu=1.5)], policy)
    assert devices_of(decision) == expected


def test_guard_off_fill_packs_fullest_first() -> None:
    nodes = [node("n1", gpus=3, shared={0: 50, 1: 70, 2: 50})]
    [decision] = run(nodes, [ask("a", gpu=0.9)], GUARD_OFF)
    assert devices_of(decision) == [[(0, 50, False), (1, 30, False), (2, 10, False)]]


def test_guard_off_evenly_spreads_over_the_emptiest() -> None:
    nodes = [node("n1", gpus=3, shared={0: 50, 1: 70, 2: 50})]
    policy = GroupScheduling(fragmentation_guard=False, device_fill=DeviceFill.EVENLY)
    [decision] = run(nodes, [ask("a", gpu=0.9)], policy)
    assert devices_of(decision) == [[(0, 45, False), (2, 45, False)]]


def test_whole_devices_prefer_one_numa_node() -> None:
    nodes = [node("n1", gpus=4, numa=[0, 0, 1, 1], whole=[0])]
    [decision] = run(nodes, [ask("a", gpu=2)])
    assert devices_of(decision) == [[(2, 100, True), (3, 100, True)]]
    assert isinstance(decision, Placed)
    assert decision.kernels["a-k0"].numa_node == 1


def test_one_device_comes_from_the_numa_node_with_the_fewest_free() -> None:
    # Keeps NUMA node 0's three devices together for a later 3-GPU request.
    nodes = [node("n1", gpus=4, numa=[0, 0, 0, 1])]
    decisions = run(nodes, [ask("one", gpu=1, order=1), ask("three", gpu=3, order=2)])
    assert [devices_of(d) for d in decisions] == [
        [[(3, 100, True)]],
        [[(0, 100, True), (1, 100, True), (2, 100, True)]],
    ]
    assert [
        d.kernels[f"{d.session_id}-k0"].numa_node for d in decisions if isinstance(d, Placed)
    ] == [1, 0]


def test_devices_across_numa_nodes_carry_no_numa_node() -> None:
    nodes = [node("n1", gpus=4, numa=[0, 0, 1, 1])]
    [decision] = run(nodes, [ask("a", gpu=3)])
    assert isinstance(decision, Placed)
    assert len(devices_of(decision)[0]) == 3
    assert decision.kernels["a-k0"].numa_node is None


def test_shares_over_several_devices_prefer_one_numa_node() -> None:
    nodes = [node("n1", gpus=4, numa=[0, 0, 1, 1], whole=[0])]
    [decision] = run(nodes, [ask("a", gpu=1.5)])
    assert [i for i, _, _ in devices_of(decision)[0]] == [2, 3]
    assert isinstance(decision, Placed)
    assert decision.kernels["a-k0"].numa_node == 1


def test_whole_and_shared_never_meet_on_a_device() -> None:
    nodes = [node("n1", gpus=2, shared={0: 10})]
    decisions = run(
        nodes,
        [ask("two", gpu=2, order=1), ask("one", gpu=1, order=2), ask("share", gpu=0.5, order=3)],
    )
    assert by_session(decisions)["two"].startswith("wait: no node in group g has 2 free GPUs")
    assert devices_of(decisions[1]) == [[(1, 100, True)]]
    assert devices_of(decisions[2]) == [[(0, 50, False)]]  # not on the whole-held device 1


def test_a_share_never_lands_on_a_whole_held_device() -> None:
    nodes = [node("n1", gpus=2, whole=[1], shared={0: 90})]
    [decision] = run(nodes, [ask("a", gpu=0.2)])
    assert by_session([decision]) == {
        "a": "wait: no node in group g has 0.2 GPU free on one device (most free: 0.1 GPU)"
    }


def test_mig_devices_are_handed_out_whole_only() -> None:
    nodes = [node("n1", gpus=2, mig=[0])]
    decisions = run(nodes, [ask("share", gpu=0.5, order=1), ask("whole", gpu=1, order=2)])
    assert devices_of(decisions[0]) == [[(1, 50, False)]]
    assert devices_of(decisions[1]) == [[(0, 100, True)]]


# ---- cluster sessions ------------------------------------------------------------------------


def test_single_node_cluster_puts_every_kernel_on_one_node_with_its_own_devices() -> None:
    nodes = [node("n1", gpus=1), node("n2", gpus=4)]
    [decision] = run(nodes, [ask("c", gpu=2, kernels=2)])
    assert isinstance(decision, Placed)
    assert set(decision.placements.values()) == {"n2"}
    assert devices_of(decision) == [
        [(0, 100, True), (1, 100, True)],
        [(2, 100, True), (3, 100, True)],
    ]


def test_single_node_cluster_waits_rather_than_split_and_takes_nothing() -> None:
    nodes = [node("n1", gpus=1), node("n2", gpus=1)]
    decisions = run(nodes, [ask("c", gpu=1, kernels=2, order=1), ask("after", gpu=1, order=2)])
    assert isinstance(decisions[0], Waiting)
    assert by_session(decisions)["after"] == "n1"


def test_single_node_cluster_with_shares_gives_each_kernel_its_share() -> None:
    nodes = [node("n1", gpus=1)]
    [decision] = run(nodes, [ask("c", gpu=0.5, kernels=2)])
    assert devices_of(decision) == [[(0, 50, False)], [(0, 50, False)]]


def test_multi_node_cluster_places_each_kernel_where_it_fits() -> None:
    nodes = [node("n1", gpus=2), node("n2", gpus=2)]
    [decision] = run(nodes, [ask("c", gpu=2, kernels=2, mode=ClusterMode.MULTI_NODE)])
    assert isinstance(decision, Placed)
    assert decision.placements == {"c-k0": "n1", "c-k1": "n2"}


def test_multi_node_kernels_may_share_a_node() -> None:
    nodes = [node("n1", gpus=2)]
    [decision] = run(nodes, [ask("c", gpu=1, kernels=2, mode=ClusterMode.MULTI_NODE)])
    assert devices_of(decision) == [[(0, 100, True)], [(1, 100, True)]]


def test_multi_node_cluster_is_all_or_none() -> None:
    nodes = [node("n1", gpus=2), node("n2", gpus=1)]
    multi = ask("c", gpu=1, kernels=4, mode=ClusterMode.MULTI_NODE, order=1)
    [decision] = run(nodes, [multi])
    assert by_session([decision]) == {
        "c": "wait: kernel 4 of 4: no node in group g has 1 free GPU (most free: 0)"
    }
    # Nothing the first three kernels took stays taken: three single GPUs are still free.
    late = run(nodes, [multi, *(ask(f"one{i}", gpu=1, order=2 + i) for i in range(3))])
    assert [isinstance(d, Placed) for d in late] == [False, True, True, True]
