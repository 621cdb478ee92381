"""The ``clusterChanges`` feed through the real gateway app on a real log: ticks refused when
too close or too far apart, a tick naming a node once the views hold its change, carrying the
named nodes as the subscriber may see them, and changes sooner than ``everyMs`` going together
in the next tick."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from events.bus import Bus
from events.domain.agent import AgentRegistered, KernelStarted
from events.domain.node import NodeRegistered, ResourcesAllocated
from events.domain.session import SessionRequested, SessionStarted
from events.queues import QueueBoard
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.subscriptions import subscribe
from schemas.devices import DeviceShare
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from services.gateway.cluster.subscriptions import ClusterChange, cluster_changes
from tests.integration.operator_gateway.support import (
    World,
    _gpus,
    cluster_as,
)
from tests.integration.test_usage import write
from tests.unit.usage_history import GIB, History

TICKS = "subscription($every: Int!) { clusterChanges(everyMs: $every) { seq nodeIds } }"


@pytest.mark.parametrize("every", [0, 49, 60_001, -1])
async def test_ticks_closer_or_further_apart_than_allowed_are_refused(
    world: World, every: int
) -> None:
    with pytest.raises(JetyardError, match=f"everyMs must be between 50 and 60000, got {every}"):
        async for _ in subscribe(world.gw.url, world.gw.root, TICKS, {"every": every}):
            pass


async def test_the_feed_ticks_with_the_node_once_the_views_hold_its_change(
    world: World, bus: Bus
) -> None:
    services = world.gw.services
    ticks = cluster_changes(bus, services.queues, services.views, poll_s=0.2)
    # A node of its own in a group of its own: the other tests' answers stay as they were.
    node_id, group = world.cast.id("gpu-b"), f"{world.group}-b"

    async def next_tick() -> ClusterChange:
        return await anext(ticks)

    first = asyncio.create_task(next_tick())
    try:
        await asyncio.sleep(0.5)  # the feed reads from the log's end: start it first
        joined = History(world.cast)
        capacity = ResourceSlots.of(cpu="2", memory=GIB)
        registered = NodeRegistered(hostname=node_id, resource_group=group, capacity=capacity)
        joined.add(AggregateType.NODE, "gpu-b", 9, registered)
        ref = AggregateRef(AggregateType.NODE, node_id)
        written = await EventStore(bus).append(Write(ref, 0, (joined.events[0].envelope,)))
        tick: ClusterChange = await asyncio.wait_for(first, 10)
        while node_id not in tick.node_ids:
            tick = await asyncio.wait_for(next_tick(), 10)
        assert tick.seq >= written.seqs[-1]
        answer = await cluster_as(world, "root")
        # The tick came once the views held the change.
        assert [n["resourceGroup"] for n in answer["nodes"] if n["id"] == node_id] == [group]
    finally:
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await first
        await ticks.aclose()


CARRIED = """subscription { clusterChanges(everyMs: 50) {
  seq nodeIds nodes { id hostname resourceGroup state } gpuMap sessionsOnNodes } }"""
NAMED = """query($ids: [ID!]!) { cluster {
  nodes(nodeIds: $ids) { id hostname resourceGroup state } gpuMap(nodeIds: $ids) } }"""


async def test_a_tick_carries_the_named_nodes_as_the_subscriber_may_see_them(
    world: World, bus: Bus
) -> None:
    # A node of its own in a group of its own, its one GPU half held by carol's session
    # (another domain than the admin who follows).
    cast = world.cast
    node_id, group = cast.id("gpu-c"), f"{world.group}-c"
    h = History(cast)
    capacity = ResourceSlots.of(cpu="4", memory=8 * GIB, gpu="1")
    (gpu,) = _gpus(node_id)[:1]
    h.add(AggregateType.NODE, "gpu-c", 0, NodeRegistered(
        hostname=node_id, resource_group=group, capacity=capacity, devices=(gpu,),
    ))  # fmt: skip
    h.add(AggregateType.AGENT, "gpu-c", 0, AgentRegistered(
        epoch=1, hostname=node_id, backend="simulated", capacity=capacity, devices=(gpu,),
        resource_group=group, images=("busybox",),
    ))  # fmt: skip
    spec = SessionSpec(
        image="busybox", resource_group=group, name="halves",
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1", memory=GIB, gpu="0.5")),),
    )  # fmt: skip
    requested = SessionRequested(
        spec=spec, kernel_ids=(cast.id("k-s4"),), owner=cast.people["carol"]
    )
    h.add(AggregateType.SESSION, "s4", 1, requested)
    share = DeviceShare(index=0, uuid=gpu.uuid, hundredths=50)
    h.add(AggregateType.NODE, "gpu-c", 2, ResourcesAllocated(
        kernel_id=cast.id("k-s4"), session_id=cast.id("s4"),
        slots=ResourceSlots.of(cpu="1", memory=GIB, gpu="0.5"), devices=(share,),
    ))  # fmt: skip
    # Started, as the scheduler and the agent would have it (other tests' schedulers fold the
    # same log).
    started = KernelStarted(kernel_id=cast.id("k-s4"), session_id=cast.id("s4"), container_id="c")
    h.add(AggregateType.AGENT, "gpu-c", 3, started)
    h.add(AggregateType.SESSION, "s4", 3, SessionStarted(reason="kernel started"))
    board = QueueBoard.on(bus)
    ticks = subscribe(world.gw.url, world.auth["admin"], CARRIED)
    first = asyncio.ensure_future(anext(ticks))
    try:
        # The feed reads from the log's end: a queue that moves says when it is listening.
        for total in range(100):
            await board.publish(group, [], total)
            await asyncio.wait({first}, timeout=0.5)
            if first.done():
                break
        await write(EventStore(bus), h.events, {})
        # The node's ticks until the one that holds the allocation (ticks 50 ms apart may
        # come between the events).
        while True:
            change = (await asyncio.wait_for(anext(ticks), 10))["clusterChanges"]
            gpus = change["gpuMap"].get(node_id)
            if gpus and gpus[0]["holds"]:
                break
    finally:
        await ticks.aclose()
    asked = (await world.gw.gql(NAMED, auth=world.auth["admin"], ids=change["nodeIds"]))["data"]
    assert change["nodes"] == asked["cluster"]["nodes"]
    assert change["gpuMap"] == asked["cluster"]["gpuMap"]
    assert [(n["id"], n["resourceGroup"]) for n in change["nodes"]] == [(node_id, group)]
    ((held,),) = [g["holds"] for g in gpus]
    assert (held["hundredths"], held["sessionId"], held["user"]) == (50, None, None)
    assert change["sessionsOnNodes"] >= 2


async def test_changes_sooner_than_every_ms_after_a_tick_go_in_the_next_one_together(
    world: World, bus: Bus
) -> None:
    services = world.gw.services
    ticks = cluster_changes(bus, services.queues, services.views, every_s=1.0, poll_s=0.2)
    store, cast = EventStore(bus), world.cast
    names = [f"fold-{i}" for i in range(3)]

    async def join(name: str) -> None:
        h = History(cast)
        registered = NodeRegistered(
            hostname=cast.id(name), resource_group=f"{world.group}-fold",
            capacity=ResourceSlots.of(cpu="2", memory=GIB),
        )  # fmt: skip
        h.add(AggregateType.NODE, name, 0, registered)
        ref = AggregateRef(AggregateType.NODE, cast.id(name))
        await store.append(Write(ref, 0, (h.events[0].envelope,)))

    first = asyncio.ensure_future(anext(ticks))
    try:
        await asyncio.sleep(0.5)  # the feed reads from the log's end: start it first
        await join(names[0])
        tick = await asyncio.wait_for(first, 10)
        while cast.id(names[0]) not in tick.node_ids:
            tick = await asyncio.wait_for(anext(ticks), 10)
        # Two nodes join one after the other, well within the second after that tick: the
        # next tick names both.
        await join(names[1])
        await asyncio.sleep(0.3)
        await join(names[2])
        later = await asyncio.wait_for(anext(ticks), 10)
        assert later.node_ids == [cast.id(names[1]), cast.id(names[2])]
    finally:
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await first
        await ticks.aclose()
