"""Device-level placement through the real scheduler on a real nats-server: the node ledger's
allocations name devices, fractional shares pack onto one device, the fragmentation guard is
a resource group setting, and cluster sessions are placed all or none with their roles.

Each test uses its own resource group (created with the settings it needs), image and agents.
"""

from __future__ import annotations

from typing import Any

import pytest

from commands.bus import CommandBus
from commands.node.aggregate import Node
from commands.repository import load
from events.bus import Bus
from events.queues import QueueBoard
from events.store import EventStore
from schemas.ids import new_id, session_id_for
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode, SessionStatus
from schemas.tenancy import DeviceFill, GroupScheduling, KeypairPolicyLimits, SessionOwner
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    create,
    eventually,
    node_of,
    reason_of,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy


def share(hundredths: int) -> ResourceSlots:
    return ResourceSlots(cpu_milli=100, memory_bytes=64 << 20, gpu_hundredths=hundredths)


async def group_owner(store: EventStore, **settings: object) -> tuple[str, SessionOwner]:
    group = f"rg-{new_id()[:8]}"
    scheduling = GroupScheduling.model_validate(settings)
    limits = KeypairPolicyLimits(max_containers_per_session=8)
    tenancy = await make_tenancy(store, limits=limits, resource_group=group, scheduling=scheduling)
    return group, tenancy.owner


async def request(bus: Bus, cmd_image: str, need: ResourceSlots, owner: SessionOwner, group: str,
                  **fields: Any) -> str:  # fmt: skip
    cmd = create(cmd_image, need, owner, resource_group=group, **fields)
    outcome = await CommandBus(bus).execute(cmd, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    return session_id_for(cmd.command_id)


async def test_four_quarter_shares_fill_one_device_and_name_it(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    group, owner = await group_owner(store)
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=16, mem=64, gpu=2), (image,), group=group)
    await agent.register()
    await node_of(store, agent)

    ids = [await request(bus, image, share(25), owner, group) for _ in range(4)]
    for session_id in ids:
        await session_in(store, session_id, SessionStatus.SCHEDULED)
    node = (await load(store, Node, agent.id)).aggregate
    assert node is not None
    held = [d for a in node.allocations.values() for d in a.devices]
    # FILL: all four on the same device, as shares; the other device stays whole-free.
    assert {(d.uuid, d.hundredths, d.whole) for d in held} == {(f"GPU-{agent.id}-0", 25, False)}
    assert len(held) == 4
    assert node.device_use() == {0: (False, 100), 1: (False, 0)}

    # The device is full of shares: a whole GPU goes to the other one.
    whole = await request(bus, image, slots(cpu=1, mem=1, gpu=1), owner, group)
    await session_in(store, whole, SessionStatus.SCHEDULED)
    node = (await load(store, Node, agent.id)).aggregate
    assert node is not None
    assert node.device_use() == {0: (False, 100), 1: (True, 0)}


@pytest.mark.parametrize("guard", [True, False])
async def test_the_fragmentation_guard_is_a_group_setting(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, guard: bool
) -> None:
    group, owner = await group_owner(
        store, fragmentation_guard=guard, device_fill=DeviceFill.EVENLY
    )
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=16, mem=64, gpu=2), (image,), group=group)
    await agent.register()
    await node_of(store, agent)
    # EVENLY: two halves land on the two devices, leaving 0.5 free on each.
    for _ in range(2):
        await session_in(
            store, await request(bus, image, share(50), owner, group), SessionStatus.SCHEDULED
        )

    wide = await request(bus, image, share(60), owner, group)
    if guard:
        reason = await reason_of(store, wide, "fragmentation")
        assert "fragmentation guard on" in reason
        return
    session = await session_in(store, wide, SessionStatus.SCHEDULED)
    node = (await load(store, Node, agent.id)).aggregate
    assert node is not None
    (allocation,) = [a for a in node.allocations.values() if a.session_id == session.id]
    # Guard off: split over the two devices, evenly as the group asks.
    assert sorted((d.index, d.hundredths) for d in allocation.devices) == [(0, 30), (1, 30)]
    assert node.device_use() == {0: (False, 80), 1: (False, 80)}


@pytest.mark.parametrize("mode", [ClusterMode.SINGLE_NODE, ClusterMode.MULTI_NODE])
async def test_a_cluster_session_is_placed_whole_with_roles_and_hosts(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler, mode: ClusterMode
) -> None:
    group, owner = await group_owner(store)
    await start_scheduler()
    agents = [FakeAgent(store, slots(cpu=8, mem=32, gpu=2), (image,), group=group) for _ in "ab"]
    for agent in agents:
        await agent.register()
        await node_of(store, agent)

    # Three kernels of two GPUs each: no single node can hold them.
    big = await request(
        bus, image, slots(cpu=1, mem=1, gpu=2), owner, group, kernels=3, cluster_mode=mode
    )
    await reason_of(store, big, "no ")
    # Two kernels of one GPU each fit (on one node when single-node).
    pair = await request(
        bus, image, slots(cpu=1, mem=1, gpu=1), owner, group, kernels=2, cluster_mode=mode
    )
    session = await session_in(store, pair, SessionStatus.SCHEDULED)
    nodes = set(session.placements.values())
    if mode is ClusterMode.SINGLE_NODE:
        assert len(nodes) == 1
    ledgers = [(await load(store, Node, node_id)).aggregate for node_id in nodes]
    allocations = {
        kernel_id: allocation
        for ledger in ledgers
        if ledger is not None
        for kernel_id, allocation in ledger.allocations.items()
        if allocation.session_id == pair
    }
    main, sub = session.kernel_ids
    assert allocations[main].env["JETYARD_CLUSTER_ROLE"] == "main"
    assert allocations[sub].env["JETYARD_CLUSTER_ROLE"] == "sub"
    assert allocations[main].hostname == "main1" and allocations[sub].hostname == "sub1"
    for index, kernel_id in enumerate(session.kernel_ids):
        env = allocations[kernel_id].env
        assert env["JETYARD_CLUSTER_INDEX"] == str(index)
        assert env["JETYARD_CLUSTER_HOSTS"] == "main1,sub1"
        assert env["JETYARD_CLUSTER_SIZE"] == "2"
        assert env["JY_TEST"] == "1"
    # Nothing of the three-kernel session was allocated anywhere (all or none).
    for agent in agents:
        ledger = (await load(store, Node, agent.id)).aggregate
        assert ledger is not None
        assert all(a.session_id != big for a in ledger.allocations.values())


async def test_waiting_sessions_get_their_queue_position_from_the_scheduler(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    group, owner = await group_owner(store)
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=16, mem=64, gpu=1), (image,), group=group)
    await agent.register()
    await node_of(store, agent)
    board = QueueBoard.on(bus)
    await board.start_watching()
    try:
        first, second, third = [
            await request(bus, image, slots(cpu=1, mem=1, gpu=1), owner, group) for _ in "abc"
        ]
        await session_in(store, first, SessionStatus.SCHEDULED)

        async def positions() -> tuple[object, ...] | None:
            found = (board.position(first), board.position(second), board.position(third))
            return found if found == (None, (1, 2), (2, 2)) else None

        await eventually(positions)
        # The running session ends: the second is placed and the third moves up.
        (kernel_id,) = (await session_in(store, first, SessionStatus.SCHEDULED)).kernel_ids
        await agent.started(kernel_id, first)
        await agent.exited(kernel_id, 0)
        await session_in(store, second, SessionStatus.SCHEDULED)

        async def moved_up() -> bool:
            return board.position(second) is None and board.position(third) == (1, 1)

        await eventually(moved_up)
    finally:
        await board.close()
