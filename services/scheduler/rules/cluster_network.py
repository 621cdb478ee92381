"""Cluster network rule, pure (reads and writes no subjects): which overlay slot a multi-node
cluster session gets, and the ``ClusterNetwork`` its allocations carry.

A slot is a VXLAN network identifier (``VNI_BASE`` + slot) and a /24 of ``CLUSTER_RANGE``
(slot 0 the first). A session takes the lowest slot no live multi-node session holds; it holds
it while any of its kernels holds an allocation (the scheduler asks every ledger: what it
finds there, its own working copies included, is the set of slots in use). Two scheduler
replicas placing in different resource groups at the same instant can pick one slot: the
second session's agents then meet a VXLAN device or subnet that is taken, refuse it, and the
session fails with that reason (docs/node-agent.md, "Networking").
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence, Set

from schemas.cluster_network import ClusterNetwork, ClusterPeer, plan_addresses

CLUSTER_RANGE = "10.64.0.0/10"
"""Where cluster sessions' subnets come from: 16,384 sessions at once, 253 addresses each (a
session holds at most 64 kernels on at most 64 nodes)."""
SLOT_PREFIX = 24
VNI_BASE = 0x10000
"""VNIs of cluster sessions start here, clear of the low numbers hand-made VXLANs use."""


def slot_count(cluster_range: str = CLUSTER_RANGE) -> int:
    return 1 << (SLOT_PREFIX - ipaddress.IPv4Network(cluster_range).prefixlen)


def free_slot(used: Set[int], cluster_range: str = CLUSTER_RANGE) -> int | None:
    """The lowest slot not in ``used``; None when every slot is held."""
    return next((slot for slot in range(slot_count(cluster_range)) if slot not in used), None)


def slot_subnet(slot: int, cluster_range: str = CLUSTER_RANGE) -> str:
    """The /24 of ``cluster_range`` that ``slot`` names."""
    base = int(ipaddress.IPv4Network(cluster_range).network_address)
    return str(ipaddress.IPv4Network((base + (slot << (32 - SLOT_PREFIX)), SLOT_PREFIX)))


def slot_of(network: ClusterNetwork) -> int:
    """The slot a session's network holds (its VNI less the base)."""
    return network.vni - VNI_BASE


def cluster_network(
    slot: int,
    kernels: Sequence[tuple[str, str, str]],
    cluster_range: str = CLUSTER_RANGE,
) -> ClusterNetwork:
    """The session's network in ``slot``, for ``kernels`` in rank order (host name, node id,
    node underlay address)."""
    subnet = slot_subnet(slot, cluster_range)
    addresses = plan_addresses(subnet, [node_id for _, node_id, _ in kernels])
    peers = tuple(
        ClusterPeer(hostname=h, rank=rank, address=a, node_id=n, node_address=u)
        for rank, ((h, n, u), a) in enumerate(zip(kernels, addresses, strict=True))
    )
    return ClusterNetwork(vni=VNI_BASE + slot, subnet=subnet, peers=peers)
