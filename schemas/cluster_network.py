"""A multi-node cluster session's overlay network, as the scheduler decides it at placement:
its VXLAN network identifier, its subnet and every kernel's name, rank and address with the
node it runs on. Pure values; the node ledger carries the same ``ClusterNetwork`` with every
kernel of the session (``ResourcesAllocated.cluster``), and each agent builds the session's
bridge, VXLAN device and the kernels' host tables from it (``services/node/overlay.py``).

Addresses: in the session's subnet, the bridges' gateways come first, one per node in the
order the nodes first appear in rank order (``.1``, ``.2``…: bridges on different hosts share
one L2 segment, so no two may claim one address), then the kernels by rank (main1 first).
Why a VXLAN overlay: docs/node-agent.md, "Networking".
"""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict, Field

VXLAN_PORT = 4789
"""IANA's VXLAN port: nodes of a cluster session must reach each other on UDP 4789."""
VXLAN_OVERHEAD = 50
"""Bytes VXLAN adds to each frame on an IPv4 underlay (outer IP 20, UDP 8, VXLAN 8, inner
Ethernet 14): the session network's MTU is the underlay's less this."""
MASTER_PORT = 29500
"""torch.distributed's customary rendezvous port, set as ``MASTER_PORT`` in every kernel."""


class ClusterPeer(BaseModel):
    """One kernel of the session: its host name and rank, its overlay address, and the node
    it runs on with that node's underlay address (where its VXLAN packets are sent)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    hostname: str
    rank: int = Field(ge=0)
    address: str
    node_id: str
    node_address: str


class ClusterNetwork(BaseModel):
    """The same for every kernel of the session; which peer a kernel is goes by its host name."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    vni: int = Field(ge=1, lt=1 << 24)
    subnet: str
    peers: tuple[ClusterPeer, ...]

    def node_ids(self) -> list[str]:
        """The session's nodes, in the order they first appear in rank order."""
        return list(dict.fromkeys(p.node_id for p in sorted(self.peers, key=lambda p: p.rank)))

    def gateway(self, node_id: str) -> str:
        """The address of ``node_id``'s bridge: the subnet's first addresses, one per node."""
        network = ipaddress.IPv4Network(self.subnet)
        return str(network.network_address + 1 + self.node_ids().index(node_id))

    def peer(self, hostname: str) -> ClusterPeer:
        return next(p for p in self.peers if p.hostname == hostname)

    def local_rank(self, hostname: str) -> int:
        """Its place among the session's kernels on its own node, by rank (``LOCAL_RANK``)."""
        nodes = [p.node_id for p in sorted(self.peers, key=lambda p: p.rank)]
        return local_rank(nodes, self.peer(hostname).rank)

    def remote_nodes(self, node_id: str) -> list[str]:
        """Underlay addresses of the session's other nodes: where this node's VXLAN device
        sends what its bridge floods."""
        addresses = {p.node_id: p.node_address for p in self.peers if p.node_id != node_id}
        return [addresses[n] for n in self.node_ids() if n in addresses]

    def node_address(self, node_id: str) -> str:
        return next(p.node_address for p in self.peers if p.node_id == node_id)


def local_rank(nodes: list[str], rank: int) -> int:
    """``LOCAL_RANK`` of the kernel of ``rank``, given every kernel's node in rank order: how many
    kernels of lower rank share its node."""
    return nodes[:rank].count(nodes[rank])


def plan_addresses(subnet: str, nodes: list[str]) -> list[str]:
    """Kernel addresses in rank order for kernels placed on ``nodes`` (one entry per kernel, its
    node id, in rank order): after one gateway per distinct node."""
    network = ipaddress.IPv4Network(subnet)
    first = network.network_address + 1 + len(dict.fromkeys(nodes))
    addresses = [str(first + rank) for rank in range(len(nodes))]
    if addresses and ipaddress.IPv4Address(addresses[-1]) >= network.broadcast_address:
        raise ValueError(f"{len(nodes)} kernels do not fit in {subnet}")
    return addresses
