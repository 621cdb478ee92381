"""What the Docker engine is asked for a kernel of a session spread over nodes (pure): the
session's network with its subnet, this node's gateway, a bridge the VXLAN device can join and
room for VXLAN's header; the container at its own address, with every peer in its hosts file.
A cluster on one node is asked for what it always was."""

from __future__ import annotations

from typing import Any

from services.node import overlay
from services.node.backend import KernelSpec
from services.node.docker_config import container_config
from services.node.networks import network_config, network_name
from services.scheduler.rules.cluster_network import cluster_network

SESSION = "session-x"
NETWORK = cluster_network(
    2,
    [
        ("main1", "node-a", "192.0.2.1"),
        ("sub1", "node-b", "192.0.2.2"),
        ("sub2", "node-b", "192.0.2.2"),
    ],
)


def build(hostname: str, node_id: str) -> dict[str, Any]:
    spec = KernelSpec(
        kernel_id=f"k-{hostname}", session_id=SESSION, image="img:1", command=None,
        hostname=hostname, cluster=NETWORK,
    )  # fmt: skip
    return container_config(spec, node_id, cluster_id="c1", stop_timeout_s=10)


def test_the_sessions_network_has_its_subnet_and_this_nodes_gateway_and_bridge() -> None:
    name = network_name(SESSION, "node-b", "c1")
    config = network_config(name, SESSION, "node-b", "c1", NETWORK, mtu=1450)

    assert config["IPAM"] == {
        "Driver": "default",
        "Config": [{"Subnet": "10.64.2.0/24", "Gateway": "10.64.2.2"}],
    }
    assert config["Options"] == {
        "com.docker.network.bridge.name": overlay.bridge_name(SESSION, "node-b"),
        "com.docker.network.driver.mtu": "1450",
    }
    # On one node the network is what it always was: Docker picks its subnet.
    assert "IPAM" not in network_config(name, SESSION, "node-b", "c1")


def test_a_kernel_has_its_own_address_and_every_peer_in_its_hosts_file() -> None:
    config = build("sub2", "node-b")

    network = network_name(SESSION, "node-b", "c1")
    assert config["HostConfig"]["NetworkMode"] == network
    assert config["NetworkingConfig"] == {
        "EndpointsConfig": {
            network: {"Aliases": ["sub2"], "IPAMConfig": {"IPv4Address": "10.64.2.5"}}
        }
    }
    assert config["HostConfig"]["ExtraHosts"] == [
        "main1:10.64.2.3", "sub1:10.64.2.4", "sub2:10.64.2.5",
    ]  # fmt: skip
    assert (
        build("main1", "node-a")["HostConfig"]["ExtraHosts"] == config["HostConfig"]["ExtraHosts"]
    )
