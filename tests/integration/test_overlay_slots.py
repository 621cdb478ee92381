"""Two sessions given one overlay slot (two scheduler replicas placing at the same instant) on
the real engine and this machine's network stack: the second session's kernel fails to start
with the reason, and leaves nothing; the first keeps its network, VXLAN device and guard rule
until its last container goes, and then nothing of it is left.

Needs root, iproute2, iptables and Docker: fails without them, never skips.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import pytest

from schemas.ids import new_id
from services.node import overlay
from services.node.backend import KernelSpec, StartFailedError
from services.node.backend_docker import DockerBackend
from services.node.networks import network_name
from services.scheduler.rules.cluster_network import cluster_network, slot_count
from tests.integration.docker_support import IMAGE, SLEEP, open_docker, remove_containers


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[DockerBackend]:
    docker = await open_docker()
    node_id, cluster_id = f"ov-{new_id()[:8]}", f"c{new_id()[:8]}"
    yield DockerBackend(docker, node_id, cluster_id=cluster_id, stop_timeout_s=1)
    await remove_containers(docker, node_id, cluster_id)
    await DockerBackend(docker, node_id, cluster_id=cluster_id, stop_timeout_s=1).networks.sweep()
    await docker.close()


def spec(session_id: str, slot: int, node_id: str) -> KernelSpec:
    """main1 of a session placed here and on a second node (an address nobody answers)."""
    network = cluster_network(
        slot, [("main1", node_id, "127.0.0.1"), ("sub1", "elsewhere", "192.0.2.99")]
    )
    return KernelSpec(
        new_id(),
        session_id,
        IMAGE,
        SLEEP,
        hostname="main1",
        cluster=network,
    )


def ours(backend: DockerBackend) -> dict[str, list[str]]:
    links = json.loads(subprocess.run(overlay.vxlan_list(), capture_output=True).stdout or "[]")
    rules = subprocess.run(overlay.guard_rules_list(), capture_output=True, text=True).stdout
    return {
        "vxlans": sorted(overlay.owned_vxlans(links, backend.cluster_id, backend.node_id)),
        "rules": sorted(overlay.owned_guards(rules, backend.cluster_id, backend.node_id)),
    }


async def networks(docker: aiodocker.Docker, backend: DockerBackend, session_id: str) -> bool:
    try:
        await docker.networks.get(network_name(session_id, backend.node_id, backend.cluster_id))
    except aiodocker.DockerError as exc:
        assert exc.status == 404
        return False
    return True


async def test_a_second_session_in_a_taken_slot_fails_with_the_reason_and_leaves_nothing(
    backend: DockerBackend,
) -> None:
    slot = slot_count() - 1 - secrets.randbelow(1000)  # clear of other runs' low slots
    first, second = f"s-{new_id()[:8]}", f"s-{new_id()[:8]}"

    container = await backend.start(spec(first, slot, backend.node_id))
    assert ours(backend) == {
        "vxlans": [overlay.vxlan_name(first, backend.node_id)],
        "rules": [first],
    }

    with pytest.raises(StartFailedError, match="another session was given the same overlay"):
        await backend.start(spec(second, slot, backend.node_id))
    assert not await networks(backend.docker, backend, second)
    assert ours(backend)["rules"] == [first]

    await backend.remove(container)
    assert ours(backend) == {"vxlans": [], "rules": []}
    assert not await networks(backend.docker, backend, first)


async def test_a_vni_held_by_a_stray_device_fails_the_kernel_and_leaves_nothing(
    backend: DockerBackend,
) -> None:
    slot = slot_count() - 1 - secrets.randbelow(1000)
    session = f"s-{new_id()[:8]}"
    stray = f"jyv{secrets.token_hex(6)}"
    vni = cluster_network(slot, [("main1", "n", "127.0.0.1")]).vni
    await overlay.run(overlay.vxlan_add(stray, vni, "127.0.0.1", 1450))
    try:
        with pytest.raises(StartFailedError, match=f"VNI {vni} is held on this node by {stray}"):
            await backend.start(spec(session, slot, backend.node_id))
        assert not await networks(backend.docker, backend, session)
        assert ours(backend) == {"vxlans": [], "rules": []}
    finally:
        await overlay.run(overlay.link_delete(stray))
