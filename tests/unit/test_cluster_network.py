"""The overlay slot rule and the addressing of a multi-node cluster session's network (pure)."""

from __future__ import annotations

import pytest

from schemas.cluster_network import ClusterNetwork, plan_addresses
from services.scheduler.rules.cluster_network import (
    VNI_BASE,
    cluster_network,
    free_slot,
    slot_count,
    slot_of,
    slot_subnet,
)

KERNELS = [
    ("main1", "node-a", "192.0.2.1"),
    ("sub1", "node-b", "192.0.2.2"),
    ("sub2", "node-a", "192.0.2.1"),
    ("sub3", "node-c", "192.0.2.3"),
]


@pytest.mark.parametrize(
    ("used", "slot"),
    [(set(), 0), ({0}, 1), ({0, 1, 3}, 2), ({1, 2}, 0)],
)
def test_a_session_takes_the_lowest_slot_no_live_session_holds(used: set[int], slot: int) -> None:
    assert free_slot(used) == slot


def test_no_slot_is_given_when_every_one_is_held() -> None:
    assert slot_count("10.64.0.0/22") == 4
    assert free_slot({0, 1, 2, 3}, "10.64.0.0/22") is None
    assert slot_count() == 16_384  # 10.64.0.0/10 in /24s


@pytest.mark.parametrize(
    ("slot", "subnet"),
    [(0, "10.64.0.0/24"), (1, "10.64.1.0/24"), (256, "10.65.0.0/24"), (16_383, "10.127.255.0/24")],
)
def test_a_slot_is_a_24_of_the_range(slot: int, subnet: str) -> None:
    assert slot_subnet(slot) == subnet


def test_the_network_names_every_kernel_by_rank_with_its_node() -> None:
    network = cluster_network(3, KERNELS)

    assert network.vni == VNI_BASE + 3
    assert slot_of(network) == 3
    assert network.subnet == "10.64.3.0/24"
    assert [(p.hostname, p.rank) for p in network.peers] == [
        ("main1", 0), ("sub1", 1), ("sub2", 2), ("sub3", 3),
    ]  # fmt: skip
    # Three nodes: three gateways (.1 .2 .3, one per node in rank order), then the kernels.
    assert network.node_ids() == ["node-a", "node-b", "node-c"]
    assert [network.gateway(n) for n in network.node_ids()] == [
        "10.64.3.1", "10.64.3.2", "10.64.3.3",
    ]  # fmt: skip
    assert [p.address for p in network.peers] == [
        "10.64.3.4", "10.64.3.5", "10.64.3.6", "10.64.3.7",
    ]  # fmt: skip
    assert [p.node_address for p in network.peers] == [k[2] for k in KERNELS]


def test_local_rank_counts_the_sessions_kernels_on_the_same_node() -> None:
    network = cluster_network(0, KERNELS)

    ranks = {h: network.local_rank(h) for h, _, _ in KERNELS}
    assert ranks == {"main1": 0, "sub1": 0, "sub2": 1, "sub3": 0}


def test_a_node_floods_to_every_other_node_of_the_session_once() -> None:
    network = cluster_network(0, KERNELS)

    assert network.remote_nodes("node-a") == ["192.0.2.2", "192.0.2.3"]
    assert network.remote_nodes("node-b") == ["192.0.2.1", "192.0.2.3"]
    assert network.node_address("node-c") == "192.0.2.3"


def test_the_largest_session_fits_in_its_24() -> None:
    # 64 kernels (MAX_KERNELS) on 64 nodes: 64 gateways and 64 kernels.
    addresses = plan_addresses("10.64.0.0/24", [f"n{i}" for i in range(64)])
    assert addresses[0] == "10.64.0.65"
    assert addresses[-1] == "10.64.0.128"
    with pytest.raises(ValueError, match="do not fit"):
        plan_addresses("10.64.0.0/28", [f"n{i}" for i in range(8)])


def test_the_network_round_trips_through_json() -> None:
    network = cluster_network(7, KERNELS)
    assert ClusterNetwork.model_validate_json(network.model_dump_json()) == network
