"""A multi-node cluster session's overlay on this node: the VXLAN device that joins the
session's Docker bridge here to its bridges on the session's other nodes, and the guard rule
that keeps connections routed in from elsewhere out of that bridge. Reads and writes no
subjects; runs ``ip``, ``bridge`` (iproute2) and ``iptables`` in the agent's network namespace,
which must be the engine's.

The functions build names and argument lists and read answers, nothing else (tested on their
own); the coroutines run them. Devices carry their owner in their interface alias and rules in
their comment (``jetyard:<cluster>/<node>/<session>``), so an agent lists, and removes, only its
own, also those left by an incarnation that died. Why VXLAN, the addressing and the guard:
docs/node-agent.md, "Networking".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shlex
import socket
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from schemas.cluster_network import VXLAN_OVERHEAD, VXLAN_PORT, ClusterNetwork

log = logging.getLogger(__name__)

ALIAS_PREFIX = "jetyard:"
FLOOD_MAC = "00:00:00:00:00:00"
"""The FDB entry for frames the bridge floods (broadcast, unknown unicast): one per other node,
so each goes to every node of the session (head-end replication)."""


class OverlayError(RuntimeError):
    """An ``ip``/``bridge`` command failed: its words and what it printed."""


def _digest(session_id: str, node_id: str) -> str:
    return hashlib.sha256(f"{session_id}/{node_id}".encode()).hexdigest()[:12]


def bridge_name(session_id: str, node_id: str) -> str:
    """The Linux bridge of the session's Docker network here (15 characters: IFNAMSIZ - 1)."""
    return f"jyb{_digest(session_id, node_id)}"


def vxlan_name(session_id: str, node_id: str) -> str:
    return f"jyv{_digest(session_id, node_id)}"


def owner_alias(cluster_id: str, node_id: str, session_id: str) -> str:
    return f"{ALIAS_PREFIX}{cluster_id}/{node_id}/{session_id}"


def vxlan_add(name: str, vni: int, local: str, mtu: int) -> list[str]:
    # Learning stays on: a remote kernel's MAC is learnt from its first frame, so unicast goes
    # to its node only (with ``nolearning`` every frame would be copied to every node).
    return [
        "ip", "link", "add", name, "mtu", str(mtu), "type", "vxlan", "id", str(vni),
        "dstport", str(VXLAN_PORT), "local", local,
    ]  # fmt: skip


def link_alias(name: str, alias: str) -> list[str]:
    return ["ip", "link", "set", "dev", name, "alias", alias]


def link_attach(name: str, bridge: str) -> list[str]:
    return ["ip", "link", "set", "dev", name, "master", bridge, "up"]


def fdb_append(name: str, remote: str) -> list[str]:
    return ["bridge", "fdb", "append", FLOOD_MAC, "dev", name, "dst", remote]


def link_delete(name: str) -> list[str]:
    return ["ip", "link", "delete", "dev", name]


def guard_rule(bridge: str, alias: str) -> list[str]:
    """The filter rule (``DOCKER-USER`` chain's words, after the action) that drops every new
    connection routed into the session's bridge from anywhere but the bridge itself. Docker's
    own rules let a host that routes the session's subnet to this node in when the machine
    forwarded before the engine started (policy ACCEPT); the session's peers on other nodes
    arrive bridged through the VXLAN device (``-i <bridge>``) and are not touched."""
    return [
        "DOCKER-USER", "-o", bridge, "!", "-i", bridge, "-m", "conntrack", "--ctstate", "NEW",
        "-m", "comment", "--comment", alias, "-j", "DROP",
    ]  # fmt: skip


def iptables(action: str, rule: Sequence[str]) -> list[str]:
    """``action``: -C (is it there), -I (insert first), -D (delete)."""
    return ["iptables", "-w", action, *rule]


def guard_rules_list() -> list[str]:
    return ["iptables", "-w", "-S", "DOCKER-USER"]


def owned_guards(listing: str, cluster_id: str, node_id: str) -> dict[str, list[str]]:
    """This node's guard rules in ``iptables -S DOCKER-USER``'s answer: session → the rule."""
    prefix = f"{ALIAS_PREFIX}{cluster_id}/{node_id}/"
    found: dict[str, list[str]] = {}
    for line in listing.splitlines():
        words = shlex.split(line)
        if words[:2] != ["-A", "DOCKER-USER"] or "--comment" not in words:
            continue
        comment = words[words.index("--comment") + 1]
        if comment.startswith(prefix):
            found[comment[len(prefix) :]] = words[1:]
    return found


def vxlan_list() -> list[str]:
    return ["ip", "-j", "-d", "link", "show", "type", "vxlan"]


def addresses_list() -> list[str]:
    return ["ip", "-j", "address", "show"]


def owned_vxlans(
    listing: Sequence[Mapping[str, Any]], cluster_id: str, node_id: str
) -> dict[str, str]:
    """This node's VXLAN devices in ``ip -j -d link show type vxlan``'s answer: name → session."""
    prefix = f"{ALIAS_PREFIX}{cluster_id}/{node_id}/"
    return {
        str(link["ifname"]): str(link["ifalias"])[len(prefix) :]
        for link in listing
        if str(link.get("ifalias", "")).startswith(prefix)
    }


def vni_holder(listing: Sequence[Mapping[str, Any]], vni: int, name: str) -> str | None:
    """Another VXLAN device that holds ``vni`` here (the kernel refuses a second one)."""
    for link in listing:
        data = (link.get("linkinfo") or {}).get("info_data") or {}
        if data.get("id") == vni and link.get("ifname") != name:
            return str(link["ifname"])
    return None


def mtu_of(listing: Sequence[Mapping[str, Any]], address: str) -> int | None:
    """The MTU of the interface holding ``address`` in ``ip -j address show``'s answer."""
    for link in listing:
        if any(a.get("local") == address for a in link.get("addr_info", ())):
            return int(link["mtu"])
    return None


def session_mtu(underlay_mtu: int) -> int:
    return underlay_mtu - VXLAN_OVERHEAD


def underlay_address(nats_url: str) -> str:
    """The source address of this machine's route to the first NATS server (no packet is
    sent: a UDP socket's connect only picks the route); "" when there is none."""
    first = nats_url.split(",")[0].strip()
    parts = urlsplit(first if "://" in first else f"nats://{first}")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((parts.hostname or "127.0.0.1", parts.port or 4222))
            return str(probe.getsockname()[0])
    except OSError:
        return ""


async def run(argv: Sequence[str]) -> str:
    """Run one command; its standard output, or ``OverlayError`` with what it printed."""
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        said = (err or out).decode(errors="replace").strip()
        raise OverlayError(f"{' '.join(argv)}: {said}")
    return out.decode()


async def underlay_mtu(address: str) -> int:
    found = mtu_of(json.loads(await run(addresses_list()) or "[]"), address)
    if found is None:
        raise OverlayError(f"no interface of this machine holds the node's address {address}")
    return found


async def ensure_vxlan(
    network: ClusterNetwork, node_id: str, cluster_id: str, session_id: str, mtu: int
) -> None:
    """The session's VXLAN device on its bridge here, sending flooded frames to every other
    node of the session. Made once: a device of that name already there (an earlier kernel's,
    an earlier incarnation's) is completed, not made again. Raises ``OverlayError`` when
    another device holds the session's VNI (two sessions given one slot)."""
    name = vxlan_name(session_id, node_id)
    listing = await _vxlans()
    clash = vni_holder(listing, network.vni, name)
    if clash is not None:
        raise OverlayError(
            f"VNI {network.vni} is held on this node by {clash} (another session was given "
            "the same overlay slot)"
        )
    if name not in {str(link["ifname"]) for link in listing}:
        await run(vxlan_add(name, network.vni, network.node_address(node_id), mtu))
    await run(link_alias(name, owner_alias(cluster_id, node_id, session_id)))
    await run(link_attach(name, bridge_name(session_id, node_id)))
    for remote in network.remote_nodes(node_id):
        try:
            await run(fdb_append(name, remote))
        except OverlayError as exc:
            if "File exists" not in str(exc):  # made by an earlier kernel: kept
                raise
    await ensure_guard(
        bridge_name(session_id, node_id), owner_alias(cluster_id, node_id, session_id)
    )
    log.info("node %s: VXLAN %s (VNI %d) joins session %s", node_id, name, network.vni, session_id)


async def ensure_guard(bridge: str, alias: str) -> None:
    rule = guard_rule(bridge, alias)
    try:
        await run(iptables("-C", rule))
    except OverlayError:
        await run(iptables("-I", rule))


async def _vxlans() -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = json.loads(await run(vxlan_list()) or "[]")
    return listed


class NodeOverlays:
    """This node's side of its multi-node sessions' overlays: VXLAN devices and guard rules,
    found again by their owner label (alias, comment) after a restart."""

    def __init__(self, cluster_id: str, node_id: str) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id

    async def join(self, network: ClusterNetwork, session_id: str, mtu: int) -> None:
        await ensure_vxlan(network, self.node_id, self.cluster_id, session_id, mtu)

    async def sessions(self) -> set[str]:
        """Sessions that have a VXLAN device or a guard rule of this node's here."""
        found: set[str] = set()
        try:
            found |= set(owned_vxlans(await _vxlans(), self.cluster_id, self.node_id).values())
        except (OverlayError, OSError) as exc:  # no iproute2: no overlay was made
            log.debug("node %s: cannot list VXLAN devices: %s", self.node_id, exc)
        try:
            listing = await run(guard_rules_list())
            found |= set(owned_guards(listing, self.cluster_id, self.node_id))
        except (OverlayError, OSError) as exc:  # no iptables, or no DOCKER-USER chain
            log.debug("node %s: cannot list guard rules: %s", self.node_id, exc)
        return found

    async def leave(self, session_id: str) -> None:
        """Remove the session's VXLAN device and guard rule here (what is gone already is
        not missed; a failure is logged and the next sweep tries again)."""
        name = vxlan_name(session_id, self.node_id)
        try:
            await run(link_delete(name))
            log.info("node %s: removed VXLAN %s", self.node_id, name)
        except (OverlayError, OSError) as exc:
            if "Cannot find device" not in str(exc):
                log.warning("node %s: could not remove VXLAN %s: %s", self.node_id, name, exc)
        try:
            listing = await run(guard_rules_list())
            rule = owned_guards(listing, self.cluster_id, self.node_id).get(session_id)
            if rule is not None:
                await run(iptables("-D", rule))
        except (OverlayError, OSError) as exc:
            log.warning(
                "node %s: could not remove the guard of %s: %s", self.node_id, session_id, exc
            )
