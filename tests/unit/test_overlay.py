"""The VXLAN link of a multi-node cluster session on one node: names, the iproute2 commands
the agent runs, and how it reads their answers (pure)."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from services.node import overlay
from services.node.networks import left_over
from services.scheduler.rules.cluster_network import cluster_network

NETWORK = cluster_network(5, [("main1", "node-a", "192.0.2.1"), ("sub1", "node-b", "192.0.2.2")])


def test_device_names_fit_linux_and_differ_per_session_and_node() -> None:
    names = {
        overlay.bridge_name("s1", "node-a"),
        overlay.bridge_name("s1", "node-b"),
        overlay.bridge_name("s2", "node-a"),
        overlay.vxlan_name("s1", "node-a"),
    }
    assert len(names) == 4
    assert all(len(n) <= 15 for n in names)  # IFNAMSIZ - 1
    assert overlay.bridge_name("s1", "node-a").startswith("jyb")
    assert overlay.vxlan_name("s1", "node-a").startswith("jyv")


def test_the_vxlan_device_is_made_on_the_sessions_vni_from_the_nodes_address() -> None:
    argv = overlay.vxlan_add("jyv0123456789ab", NETWORK.vni, "192.0.2.1", 1450)

    assert argv == [
        "ip", "link", "add", "jyv0123456789ab", "mtu", "1450", "type", "vxlan",
        "id", str(NETWORK.vni), "dstport", "4789", "local", "192.0.2.1",
    ]  # fmt: skip


def test_it_joins_the_bridge_and_floods_to_each_other_node() -> None:
    assert overlay.link_attach("jyv1", "jyb1") == [
        "ip", "link", "set", "dev", "jyv1", "master", "jyb1", "up",
    ]  # fmt: skip
    assert [overlay.fdb_append("jyv1", r) for r in NETWORK.remote_nodes("node-a")] == [
        ["bridge", "fdb", "append", "00:00:00:00:00:00", "dev", "jyv1", "dst", "192.0.2.2"]
    ]
    assert overlay.link_delete("jyv1") == ["ip", "link", "delete", "dev", "jyv1"]
    assert overlay.link_alias("jyv1", overlay.owner_alias("c", "n", "s")) == [
        "ip", "link", "set", "dev", "jyv1", "alias", "jetyard:c/n/s",
    ]  # fmt: skip


def test_new_connections_into_the_bridge_from_elsewhere_are_dropped() -> None:
    alias = overlay.owner_alias("c", "node-a", "s1")
    rule = overlay.guard_rule("jyb1", alias)

    assert overlay.iptables("-I", rule) == [
        "iptables", "-w", "-I", "DOCKER-USER", "-o", "jyb1", "!", "-i", "jyb1",
        "-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment", alias, "-j", "DROP",
    ]  # fmt: skip
    # As ``iptables -S DOCKER-USER`` prints them: only this node's, keyed by session.
    listing = "\n".join(
        [
            "-N DOCKER-USER",
            "-A DOCKER-USER -o jyb1 ! -i jyb1 -m conntrack --ctstate NEW -m comment "
            f'--comment "{alias}" -j DROP',
            "-A DOCKER-USER -o jyb2 ! -i jyb2 -m conntrack --ctstate NEW -m comment "
            '--comment "jetyard:c/node-b/s2" -j DROP',
            "-A DOCKER-USER -j RETURN",
        ]
    )
    assert overlay.owned_guards(listing, "c", "node-a") == {"s1": rule}


def vxlan(name: str, vni: int, alias: str | None = None) -> dict[str, Any]:
    link: dict[str, Any] = {
        "ifname": name,
        "linkinfo": {"info_kind": "vxlan", "info_data": {"id": vni, "port": 4789}},
    }
    if alias is not None:
        link["ifalias"] = alias
    return link


def test_an_agent_lists_only_its_own_devices_and_which_are_left_over() -> None:
    listing = [
        vxlan("jyv1", 1, overlay.owner_alias("c", "node-a", "s1")),
        vxlan("jyv2", 2, overlay.owner_alias("c", "node-a", "s2")),
        vxlan("jyv3", 3, overlay.owner_alias("c", "node-b", "s3")),  # another agent's
        vxlan("jyv4", 4, overlay.owner_alias("other", "node-a", "s4")),  # another cluster's
        vxlan("vx0", 5),  # not Jetyard's
    ]

    owned = overlay.owned_vxlans(listing, "c", "node-a")

    assert owned == {"jyv1": "s1", "jyv2": "s2"}
    assert left_over(owned, {"s2", "unrelated"}) == ["jyv1"]


def test_a_vni_held_by_another_device_is_a_clash() -> None:
    listing = [vxlan("jyv1", 70000), vxlan("jyv2", 70001)]

    assert overlay.vni_holder(listing, 70000, "jyv9") == "jyv1"
    assert overlay.vni_holder(listing, 70000, "jyv1") is None  # itself: made before
    assert overlay.vni_holder(listing, 70002, "jyv9") is None


def test_the_session_mtu_leaves_room_for_vxlan() -> None:
    listing = [
        {"ifname": "lo", "mtu": 65536, "addr_info": [{"family": "inet", "local": "127.0.0.1"}]},
        {"ifname": "eth0", "mtu": 9000, "addr_info": [{"family": "inet", "local": "192.0.2.1"}]},
    ]
    found = overlay.mtu_of(listing, "192.0.2.1")
    assert found == 9000
    assert overlay.session_mtu(found) == 8950
    assert overlay.mtu_of(listing, "192.0.2.9") is None


def test_the_underlay_address_is_the_source_of_the_route_to_nats() -> None:
    assert overlay.underlay_address("nats://127.0.0.1:4222") == "127.0.0.1"
    assert overlay.underlay_address("127.0.0.1:4222,nats://127.0.0.2:4222") == "127.0.0.1"
    own = overlay.underlay_address(f"nats://{socket.gethostname()}:4222")
    assert own == "" or own.count(".") == 3


@pytest.mark.parametrize("argv", [["false"], ["sh", "-c", "echo nope >&2; exit 2"]])
async def test_a_failing_command_says_what_it_printed(argv: list[str]) -> None:
    with pytest.raises(overlay.OverlayError, match=argv[0]):
        await overlay.run(argv)
