"""A cluster session's network, the pure part: its name, its create body, which kernels join it
(and only it, reachable by their host names), and which networks are left over."""

from __future__ import annotations

import re
from typing import Any

import pytest

from services.node.backend import (
    LABEL_CLUSTER,
    LABEL_MANAGED,
    LABEL_NODE,
    LABEL_SESSION,
    KernelSpec,
)
from services.node.docker_config import container_config
from services.node.networks import (
    endpoint_config,
    kernel_network,
    left_over,
    network_config,
    network_name,
)

# What Docker accepts as a network name.
DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
SESSION = "0b6f3c9e-9a51-4c3a-8d0e-2f1f6c1f0a11"


def spec(hostname: str = "", session_id: str = SESSION) -> KernelSpec:
    return KernelSpec(
        kernel_id="k1", session_id=session_id, image="img:1", command=None, hostname=hostname
    )


def build(kernel: KernelSpec) -> dict[str, Any]:
    return container_config(kernel, "node-1", cluster_id="c1", stop_timeout_s=10)


def test_a_network_is_named_from_its_session_and_is_its_owners_alone() -> None:
    name = network_name(SESSION, "node-1", "c1")

    assert DOCKER_NAME.match(name) and SESSION in name
    assert name == network_name(SESSION, "node-1", "c1")  # two creators collide on one name
    others = {
        network_name("another-session", "node-1", "c1"),
        network_name(SESSION, "node-2", "c1"),  # another agent on the same engine
        network_name(SESSION, "node-1", "c2"),  # another installation
    }
    assert name not in others and len(others) == 3


def test_the_create_body_is_a_labelled_bridge_that_refuses_a_duplicate() -> None:
    config = network_config("jy-net-x", SESSION, "node-1", "c1")

    assert (config["Name"], config["Driver"], config["CheckDuplicate"]) == (
        "jy-net-x",
        "bridge",
        True,
    )
    assert config["Labels"] == {
        LABEL_MANAGED: "true",
        LABEL_NODE: "node-1",
        LABEL_CLUSTER: "c1",
        LABEL_SESSION: SESSION,
    }
    assert not config.get("Internal")  # egress, as on the default bridge


@pytest.mark.parametrize("host", ["main1", "sub3"])
def test_a_cluster_kernel_joins_only_its_sessions_network_under_its_host_name(host: str) -> None:
    config = build(spec(hostname=host))

    network = network_name(SESSION, "node-1", "c1")
    assert kernel_network(spec(hostname=host), "node-1", "c1") == network
    assert config["HostConfig"]["NetworkMode"] == network  # not also the default bridge
    assert config["NetworkingConfig"] == endpoint_config(network, host)
    assert config["NetworkingConfig"] == {"EndpointsConfig": {network: {"Aliases": [host]}}}
    assert config["Hostname"] == host


def test_a_kernel_without_a_cluster_host_name_stays_on_the_default_bridge() -> None:
    config = build(spec())

    assert kernel_network(spec(), "node-1", "c1") is None
    assert "NetworkMode" not in config["HostConfig"]
    assert "NetworkingConfig" not in config


def test_a_network_is_left_over_once_its_session_has_no_container_here() -> None:
    networks = {"net-a": "a", "net-b": "b", "net-c": "c"}

    assert left_over(networks, {"a", "c", "unrelated"}) == ["net-b"]
    assert left_over(networks, set()) == ["net-a", "net-b", "net-c"]
    assert left_over({}, {"a"}) == []
