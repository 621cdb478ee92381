"""The scheduler's metrics in memory: a scrape parsed by Prometheus' own parser says what the
folded state holds (sessions by status, the queue and its waits, node states, each node's and
each GPU's allocation), and the latency histogram times exactly the placements the pass store
stored."""

from __future__ import annotations

from commands.node.aggregate import Node
from commands.node.rules import Allocation
from events.metrics import Metrics
from schemas.resources import ResourceSlots
from services.scheduler.metrics import (
    LatencyObserved,
    SchedulerCollector,
    latency_histogram,
    node_state,
)
from tests.metrics_support import Scraped
from tests.unit.pass_support import GIB, World, slots
from tests.unit.scenario import T0


def half_gpu() -> ResourceSlots:
    return ResourceSlots(cpu_milli=1000, memory_bytes=GIB, gpu_hundredths=50)


class Scheduled:
    """A world with the scheduler's metrics over its state, as the service wires them."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.metrics = Metrics()
        self.store = LatencyObserved(world.store, world.state, latency_histogram(self.metrics))
        self.published: dict[str, list[str]] = {}
        self.metrics.add(SchedulerCollector(world.state, self.published, world.clock))

    async def decide(self) -> None:
        await self.world.decide(store=self.store)
        self.published.update(self.world.state.queues)  # as Scheduler._publish_queues does

    async def scrape(self) -> Scraped:
        return Scraped((await self.metrics.render()).decode())


async def test_a_scrape_says_what_the_state_holds() -> None:
    world = World()
    await world.tenancy()
    node_id = await world.register("gpu-1", slots(cpu=8, mem=32, gpu=2))
    scheduled = Scheduled(world)
    whole = await world.create(slots(gpu=1))
    shared = await world.create(half_gpu())
    too_big = await world.create(slots(gpu=2))
    world.clock.advance(3)
    await scheduled.decide()
    world.clock.advance(7)

    page = await scheduled.scrape()

    status = {sid: world.state.sessions[sid].session.status.value for sid in (whole, shared)}
    assert status == {whole: "SCHEDULED", shared: "SCHEDULED"}
    assert page.get("jetyard_sessions", status="SCHEDULED", resource_group="default") == 2
    assert page.get("jetyard_sessions", status="PENDING", resource_group="default") == 1
    assert page.get("jetyard_sessions", status="RUNNING", resource_group="default") == 0
    assert page.total("jetyard_sessions") == len(world.state.sessions) == 3
    assert world.state.queues["default"] == [too_big]
    assert page.get("jetyard_queue_length", resource_group="default") == 1
    # It has been PENDING since its request: 3 s before the pass, 7 s after.
    assert page.get("jetyard_queue_oldest_wait_seconds", resource_group="default") == 10
    assert page.get("jetyard_queue_mean_wait_seconds", resource_group="default") == 10
    gpus = page.where("jetyard_gpu_allocated", node=node_id)
    assert sorted(gpus.values()) == [0.5, 1.0]
    assert {dict(labels)["uuid"] for labels in gpus} == {"GPU-gpu-1-0", "GPU-gpu-1-1"}
    node = {"node": node_id, "hostname": "gpu-1", "resource_group": "default"}
    assert page.get("jetyard_node_allocated", **node, resource="gpu") == 1.5
    assert page.get("jetyard_node_allocated", **node, resource="cpu") == 2
    assert page.get("jetyard_node_allocated", **node, resource="memory") == 2 * GIB
    assert page.get("jetyard_node_capacity", **node, resource="gpu") == 2
    assert page.get("jetyard_nodes", state="schedulable", resource_group="default") == 1
    assert page.get("jetyard_nodes", state="lost", resource_group="default") == 0
    # Each placement timed from its request to its SessionScheduled: 3 s.
    latency = {"resource_group": "default"}
    assert page.get("jetyard_scheduling_latency_seconds_count", **latency) == 2
    assert page.get("jetyard_scheduling_latency_seconds_sum", **latency) == 6
    assert page.get("jetyard_scheduling_latency_seconds_bucket", **latency, le="2.5") == 0
    assert page.get("jetyard_scheduling_latency_seconds_bucket", **latency, le="5.0") == 2


async def test_a_session_placed_later_is_timed_once_and_leaves_the_queue() -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-1", slots(cpu=8, mem=32, gpu=1))
    scheduled = Scheduled(world)
    first = await world.create(slots(gpu=1))
    second = await world.create(slots(gpu=1))
    await scheduled.decide()
    await world.started(first)
    await scheduled.decide()
    world.clock.advance(60)
    await world.exited(first, 0)
    await scheduled.decide()

    page = await scheduled.scrape()

    assert world.state.sessions[second].session.status.value == "SCHEDULED"
    assert page.get("jetyard_sessions", status="TERMINATED", resource_group="default") == 1
    assert page.get("jetyard_queue_length", resource_group="default") == 0
    assert page.get("jetyard_queue_oldest_wait_seconds", resource_group="default") == 0
    latency = {"resource_group": "default"}
    assert page.get("jetyard_scheduling_latency_seconds_count", **latency) == 2
    assert page.get("jetyard_scheduling_latency_seconds_sum", **latency) == 60


def test_node_states_are_the_apis() -> None:
    node = Node.register("n-1", "gpu-1", "default", slots(), T0)
    assert node_state(node) == "schedulable"
    node.cordoned = True
    assert node_state(node) == "cordoned"
    node.draining = True
    assert node_state(node) == "drained"
    node.allocations = {"k": Allocation(session_id="s", slots=slots())}
    assert node_state(node) == "draining"
    node.lost = True
    assert node_state(node) == "lost"
