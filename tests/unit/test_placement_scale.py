"""A pass at the size the scheduler meets: 20,000 requests on 1,000 nodes of 8 GPUs in one
call. Asserts correctness, not time (the time is printed: run with -s to see it)."""

from __future__ import annotations

import random
import time

import pytest

from placement import (
    KernelRequest,
    NodeOffer,
    Placed,
    Placer,
    SessionRequest,
    Waiting,
)
from schemas.resources import ResourceSlots
from schemas.tenancy import AgentSelection, GroupScheduling, QueuePolicy
from tests.unit.placement_support import GIB, check, node

SHAPES = [  # (cpu cores, memory GiB, GPUs): presets people pick
    (4, 32, 1),
    (8, 64, 2),
    (16, 128, 4),
    (32, 256, 8),
    (2, 8, 0.25),
    (2, 16, 0.5),
    (1, 2, 0),
    (4, 16, 0),
]


def _cluster() -> list[NodeOffer]:
    return [
        node(f"node-{i:04d}", cpu=128, mem=1024, gpus=8, numa=[0, 0, 0, 0, 1, 1, 1, 1])
        for i in range(1000)
    ]


def _stream(count: int = 20_000) -> list[SessionRequest]:
    rnd = random.Random(5)
    requests = []
    for i in range(count):
        cpu, mem, gpu = rnd.choice(SHAPES)
        slots = ResourceSlots(
            cpu_milli=cpu * 1000, memory_bytes=mem * GIB, gpu_hundredths=round(gpu * 100)
        )
        requests.append(
            SessionRequest(
                f"session-{i:06d}",
                "img",
                (KernelRequest(f"kernel-{i:06d}", slots),),
                owner=f"key-{rnd.randrange(50)}",
                order=i,
            )
        )
    return requests


def _fits_somewhere(need: ResourceSlots, nodes: list[NodeOffer]) -> bool:
    """Plain rules over the final ledger, independent of the engine."""
    for n in nodes:
        if n.free.cpu_milli < need.cpu_milli or n.free.memory_bytes < need.memory_bytes:
            continue
        h = need.gpu_hundredths
        free_devices = sum(1 for d in n.devices if not d.whole and d.shared == 0)
        rooms = [100 - d.shared for d in n.devices if not d.whole]
        if h % 100 == 0 and free_devices >= h // 100:
            return True
        if h % 100 and max(rooms, default=0) >= h:
            return True
    return False


@pytest.mark.parametrize(
    "policy",
    [
        GroupScheduling(agent_selection=AgentSelection.CONCENTRATED),
        GroupScheduling(agent_selection=AgentSelection.DISPERSED),
        GroupScheduling(agent_selection=AgentSelection.ROUND_ROBIN),
        GroupScheduling(queue_policy=QueuePolicy.DRF),
    ],
    ids=["concentrated", "dispersed", "roundrobin", "drf"],
)
def test_twenty_thousand_requests_on_a_thousand_nodes(policy: GroupScheduling) -> None:
    nodes, requests = _cluster(), _stream()
    started = time.perf_counter()
    decisions = Placer().place(requests, nodes, policy, group="big")
    elapsed = time.perf_counter() - started
    placed = sum(isinstance(d, Placed) for d in decisions)
    print(
        f"\n{policy.agent_selection}/{policy.queue_policy}: {elapsed * 1000:.0f} ms, "
        f"{elapsed / len(requests) * 1e6:.1f} µs per decision, {placed} placed"
    )
    after = check(nodes, requests, decisions)
    assert placed > 5_000
    # Backfill without a starving head: whatever waits fits nowhere on what is left.
    asked = {r.session_id: r for r in requests}
    waiting_shapes = {
        asked[d.session_id].kernels[0].slots for d in decisions if isinstance(d, Waiting)
    }
    assert waiting_shapes
    assert not any(_fits_somewhere(shape, after) for shape in waiting_shapes)
