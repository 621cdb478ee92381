"""A cluster session's network on this node: one user-defined bridge per session, on which its
kernels' host names (``main1``, ``sub1``…) resolve through Docker's DNS and which no other
session's container joins. For a session on several nodes the bridge has the session's subnet
and a VXLAN device joining it to the session's bridges on the other nodes
(``services.node.overlay``). Reads and writes no subjects; talks only to the local Docker engine
(and, for the VXLAN devices, to this machine's network stack).

The functions decide (names, bodies, which networks are left over) and read nothing;
``SessionNetworks`` makes the network before a session's first kernel here is created and
removes it once the session has no container left on this node. Why one network per cluster
session, and how kernels on different nodes would reach each other: docs/node-agent.md,
"Networking".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Mapping, Set
from contextlib import asynccontextmanager
from typing import Any
from weakref import WeakValueDictionary

import aiodocker

from schemas.cluster_network import ClusterNetwork
from services.node import overlay
from services.node.backend import LABEL_SESSION, KernelSpec, StartFailedError, owner_labels

log = logging.getLogger(__name__)


def network_name(session_id: str, node_id: str, cluster_id: str) -> str:
    """Named from the session, and from the agent that owns it (a short digest of its cluster
    and node ids): two agents on one engine with kernels of one session never share (or
    remove) each other's network, as two machines would not."""
    owner = hashlib.sha256(f"{cluster_id}/{node_id}".encode()).hexdigest()[:8]
    return f"jy-net-{session_id}-{owner}"


def kernel_network(spec: KernelSpec, node_id: str, cluster_id: str) -> str | None:
    """The network a kernel joins: its session's when it has a cluster host name (the scheduler
    names only the kernels of a cluster session); None: the engine's default bridge."""
    return network_name(spec.session_id, node_id, cluster_id) if spec.hostname else None


def network_config(
    name: str,
    session_id: str,
    node_id: str,
    cluster_id: str,
    cluster: ClusterNetwork | None = None,
    mtu: int | None = None,
) -> dict[str, Any]:
    """The body of Docker's ``POST /networks/create``: a bridge with egress (as the default
    bridge has), labelled as this node's so the agent finds and removes only its own. For a
    session on several nodes: the session's subnet with this node's gateway, a bridge device
    named so the VXLAN device can join it, and an MTU that leaves room for VXLAN's header."""
    config: dict[str, Any] = {
        "Name": name,
        "Driver": "bridge",
        # Before API 1.44 the engine makes a second network of the same name unless asked to
        # refuse it (409); a refusal is how a second creator learns the network exists.
        "CheckDuplicate": True,
        "Labels": {**owner_labels(cluster_id, node_id), LABEL_SESSION: session_id},
    }
    if cluster is not None:
        config["IPAM"] = {
            "Driver": "default",
            "Config": [{"Subnet": cluster.subnet, "Gateway": cluster.gateway(node_id)}],
        }
        options = {"com.docker.network.bridge.name": overlay.bridge_name(session_id, node_id)}
        if mtu is not None:
            options["com.docker.network.driver.mtu"] = str(mtu)
        config["Options"] = options
    return config


def endpoint_config(network: str, hostname: str, address: str = "") -> dict[str, Any]:
    """A container's ``NetworkingConfig``: on ``network``, reachable by its host name (the
    engine's DNS answers container names and aliases, not host names); at ``address`` (its
    session's choice, when the session spans nodes) if one is given."""
    endpoint: dict[str, Any] = {"Aliases": [hostname]}
    if address:
        endpoint["IPAMConfig"] = {"IPv4Address": address}
    return {"EndpointsConfig": {network: endpoint}}


def extra_hosts(cluster: ClusterNetwork) -> list[str]:
    """``HostConfig.ExtraHosts``: every kernel of the session by name, in its ``/etc/hosts``
    (the engine's DNS knows only its own containers, not those on other nodes)."""
    return [f"{p.hostname}:{p.address}" for p in sorted(cluster.peers, key=lambda p: p.rank)]


def left_over(networks: Mapping[str, str], sessions: Set[str]) -> list[str]:
    """Networks (name → session id) whose session has no container on this node any more."""
    return sorted(name for name, session in networks.items() if session not in sessions)


class SessionNetworks:
    """This node's session networks on one engine. A lock per network orders its creation,
    the creation of a container on it and its removal, so two kernels starting at once make
    it once, and a sweep never removes it between its creation and its first container's."""

    def __init__(self, docker: aiodocker.Docker, node_id: str, cluster_id: str) -> None:
        self._docker = docker
        self.node_id = node_id
        self.cluster_id = cluster_id
        # Weak: a lock lives while someone holds or waits for it, not for every past session.
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()
        self.overlays = overlay.NodeOverlays(cluster_id, node_id)

    def _lock(self, name: str) -> asyncio.Lock:
        lock = self._locks.get(name)
        if lock is None:
            lock = self._locks[name] = asyncio.Lock()
        return lock

    def _owned(self) -> list[str]:
        return [f"{k}={v}" for k, v in owner_labels(self.cluster_id, self.node_id).items()]

    @asynccontextmanager
    async def joined(self, spec: KernelSpec) -> AsyncIterator[None]:
        """Hold while the kernel's container is created: its session's network exists (made
        now if needed) and stays until that container exists to keep it."""
        name = kernel_network(spec, self.node_id, self.cluster_id)
        if name is None:
            yield
            return
        async with self._lock(name):
            cluster = spec.cluster
            await self._ensure(name, spec.session_id, cluster)
            yield

    async def _ensure(self, name: str, session_id: str, cluster: ClusterNetwork | None) -> None:
        mtu = None
        if cluster is not None:
            mtu = await self._session_mtu(cluster)
        config = network_config(name, session_id, self.node_id, self.cluster_id, cluster, mtu)
        try:
            await self._docker.networks.create(config)
            log.info("node %s: made network %s", self.node_id, name)
        except aiodocker.DockerError as exc:
            if exc.status != 409:  # 409: made for an earlier kernel, or an earlier incarnation
                said = f"Docker could not make the session's network {name}: {exc.message}"
                if cluster is not None and "overlap" in str(exc.message):
                    said += f" ({cluster.subnet}: another session was given the same overlay slot)"
                raise StartFailedError(said) from exc
        if cluster is None:
            return
        try:  # again for every kernel: an agent that died half-way left it incomplete
            await self.overlays.join(cluster, session_id, mtu or 0)
        except (overlay.OverlayError, OSError) as exc:
            # Nothing stays for a kernel that will not start (no removal would sweep it).
            if not await self._used(session_id):
                await self.overlays.leave(session_id)
                await self._remove(name)
            raise StartFailedError(f"could not join the session's overlay: {exc}") from exc

    async def _session_mtu(self, cluster: ClusterNetwork) -> int:
        address = cluster.node_address(self.node_id)
        if not address:
            raise StartFailedError(
                "this node registered no address (JETYARD_AGENT_ADDRESS): the session's "
                "kernels on other nodes could not reach it"
            )
        try:
            return overlay.session_mtu(await overlay.underlay_mtu(address))
        except overlay.OverlayError as exc:
            raise StartFailedError(f"could not find the session's MTU: {exc}") from exc

    async def sweep(self) -> None:
        """Remove this node's session networks (and multi-node sessions' overlays) whose
        session has no container here any more: its last one was removed, or the agent died
        between removing it and its network."""
        owned = self._owned()
        listed = await self._docker.networks.list(filters={"label": owned})
        networks = {
            str(n["Name"]): str((n.get("Labels") or {}).get(LABEL_SESSION, "")) for n in listed
        }
        overlays = await self.overlays.sessions()
        if not networks and not overlays:
            return
        containers = await self._docker.containers.list(
            all=True, filters=json.dumps({"label": owned})
        )
        sessions = {str((c["Labels"] or {}).get(LABEL_SESSION, "")) for c in containers}
        # Name -> session, for networks and for overlays whose network went already (the
        # name is also the lock's).
        found = dict(networks)
        found.update({network_name(s, self.node_id, self.cluster_id): s for s in overlays})
        for name in left_over(found, sessions):
            session = found[name]
            async with self._lock(name):
                # A kernel may have joined since the listing: look again, under the lock.
                if await self._used(session):
                    continue
                if session in overlays:  # first: its device is on the network's bridge
                    await self.overlays.leave(session)
                if name in networks:
                    await self._remove(name)

    async def _used(self, session_id: str) -> bool:
        labels = [*self._owned(), f"{LABEL_SESSION}={session_id}"]
        found = await self._docker.containers.list(all=True, filters=json.dumps({"label": labels}))
        return bool(found)

    async def _remove(self, name: str) -> None:
        try:
            await (await self._docker.networks.get(name)).delete()
        except aiodocker.DockerError as exc:
            if exc.status != 404:  # gone already; anything else: the next sweep tries again
                log.warning("node %s: could not remove network %s: %s", self.node_id, name, exc)
            return
        log.info("node %s: removed network %s", self.node_id, name)
