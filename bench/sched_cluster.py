"""The scale benchmark's workload and its reading of the cluster: the session mix, the tenancy
that owns the sessions, and GPU use and fragmentation as the node ledgers (``ev.node.*``) say.

The mix (fractions of the sessions; GPU in hundredths of a device):

    8 GPUs 0.5 %, 4 GPUs 1 %, 2 GPUs 2.5 %, 1 GPU 10 %, 0.5 GPU 15 %, 0.25 GPU 25 %,
    CPU only 46 %

which asks for 36.75 hundredths per session on average: 20,000 sessions on 1,000 nodes of 8
GPUs ask for 735,000 of 800,000 hundredths (91.9 %), close to but under capacity. CPU asks
are 0.5 (CPU only), 1 (fractional) or 2 per whole GPU; memory 1 GiB + 8 GiB per GPU. Nodes
have 256 CPUs and 2 TiB, so GPUs are what runs out.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field

from events.bus import Bus
from events.store import EventStore
from events.tail import Tail
from schemas.resources import ResourceSlots
from schemas.subjects import events_of
from schemas.tenancy import (
    AgentSelection,
    GroupScheduling,
    KeypairPolicyLimits,
    SessionOwner,
    SlotLimits,
)
from tests.tenancy_support import add_member, make_tenancy

MIX: tuple[tuple[int, float], ...] = (
    (800, 0.005),
    (400, 0.01),
    (200, 0.025),
    (100, 0.10),
    (50, 0.15),
    (25, 0.25),
)
"""GPU hundredths and the fraction of sessions asking for it; the rest ask for no GPU."""
GIB = 1 << 30


def resources(gpu_hundredths: int) -> ResourceSlots:
    if gpu_hundredths == 0:
        cpu_milli = 500
    elif gpu_hundredths % 100:
        cpu_milli = 1000
    else:
        cpu_milli = 20 * gpu_hundredths
    memory = GIB + 8 * GIB * gpu_hundredths // 100
    return ResourceSlots(cpu_milli=cpu_milli, memory_bytes=memory, gpu_hundredths=gpu_hundredths)


def session_mix(count: int, seed: int) -> list[int]:
    """GPU hundredths of each session, in a shuffled (seeded) order."""
    sizes: list[int] = []
    for hundredths, fraction in MIX:
        sizes += [hundredths] * round(count * fraction)
    sizes += [0] * (count - len(sizes))
    random.Random(seed).shuffle(sizes)
    return sizes


SCHEDULING = GroupScheduling(agent_selection=AgentSelection.CONCENTRATED)
"""The group's settings: packing (concentrated), FIFO, backfill, guard on, FILL."""


async def owners(store: EventStore, projects: int, gpu_capacity: int) -> list[SessionOwner]:
    """One domain with ``projects`` projects, a keypair each. Limits are generous but real:
    each project may hold 40 % of the cluster's GPUs (the mix spreads ~23 % on each of 4),
    the domain all of them; keypairs limit nothing but priority."""
    project_slots = SlotLimits(gpu_hundredths=gpu_capacity * 4 // 10)
    limits = KeypairPolicyLimits(max_containers_per_session=1)
    first = await make_tenancy(
        store, limits=limits, project_slots=project_slots,
        domain_slots=SlotLimits(gpu_hundredths=gpu_capacity), scheduling=SCHEDULING,
    )  # fmt: skip
    found = [first.owner]
    for _ in range(projects - 1):
        found.append((await add_member(store, first, project_slots=project_slots)).owner)
    return found


@dataclass
class NodeUse:
    capacity: int = 0
    """GPU hundredths."""
    devices: int = 0
    used: dict[str, int] = field(default_factory=dict)
    """Kernel id -> GPU hundredths it holds."""
    shares: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Kernel id -> (device index, hundredths) when allocations name devices."""

    def per_device(self) -> list[int]:
        per = [0] * self.devices
        for held in self.shares.values():
            for index, hundredths in held:
                per[index] += hundredths
        return per


async def read_cluster(bus: Bus) -> dict[str, NodeUse]:
    """Every node ledger as stored now, from the log (not from the scheduler's memory)."""
    store = EventStore(bus)
    end = await store.stream_last_seq()
    tail = Tail(bus, subjects=[events_of("node")])
    nodes: dict[str, NodeUse] = {}
    while tail.position < end:
        batch = await tail.fetch_raw(2.0)
        if not batch and await tail.num_pending() == 0:
            break
        for message in batch:
            node = nodes.setdefault(message.subject.rsplit(".", 1)[1], NodeUse())
            _apply(node, message.headers.get("Jy-Event", ""), json.loads(message.data)["payload"])
    await tail.close()
    return nodes


def _apply(node: NodeUse, name: str, payload: dict[str, object]) -> None:
    if name in ("NodeRegistered", "NodeCapacityChanged"):
        capacity = payload.get("capacity")
        assert isinstance(capacity, dict)
        node.capacity = int(capacity.get("gpu_hundredths", 0))
        devices = payload.get("devices") or ()
        node.devices = len(devices) if isinstance(devices, list) else node.capacity // 100
        node.devices = node.devices or node.capacity // 100
    elif name == "ResourcesAllocated":
        kernel = str(payload["kernel_id"])
        slots = payload.get("slots")
        assert isinstance(slots, dict)
        node.used[kernel] = int(slots.get("gpu_hundredths", 0))
        shares = payload.get("devices") or []
        assert isinstance(shares, list)
        node.shares[kernel] = [(int(s["index"]), int(s["hundredths"])) for s in shares]
    elif name == "ResourcesReleased":
        kernel = str(payload["kernel_id"])
        node.used.pop(kernel, None)
        node.shares.pop(kernel, None)


def fragmentation(nodes: dict[str, NodeUse]) -> dict[str, float]:
    """What the placements left: GPU placed, devices partly shared, free hundredths stranded
    on devices that cannot take a whole-GPU request, and nodes by free whole devices. Where
    allocations do not name devices (before device-level placement), a node's GPUs are
    counted as an amount: its free hundredths beyond whole devices count as one partly
    used device."""
    named = any(held for node in nodes.values() for held in node.shares.values())
    partly = stranded = some_whole = all_whole = 0
    for node in nodes.values():
        if named:
            per = node.per_device()
            partial = [100 - used for used in per if 0 < used < 100]
            whole = sum(1 for used in per if used == 0)
        else:
            free = node.capacity - sum(node.used.values())
            partial = [free % 100] if free % 100 else []
            whole = free // 100
        partly += len(partial)
        stranded += sum(partial)
        some_whole += whole >= 1
        all_whole += bool(node.devices) and whole >= node.devices
    return {
        "GPU hundredths placed": sum(sum(n.used.values()) for n in nodes.values()),
        "GPU hundredths in the cluster": sum(n.capacity for n in nodes.values()),
        "allocations name their devices (1 yes, 0 no)": float(named),
        "devices partly used": partly,
        "free hundredths stranded on partly used devices": stranded,
        "nodes with a free whole GPU": some_whole,
        "nodes with every GPU free": all_whole,
    }
