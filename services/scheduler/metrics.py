"""The scheduler's Prometheus metrics (``docs/metrics.md``), computed at scrape time from its
folded state: sessions by status, each resource group's queue (length, oldest and mean wait),
node states, each node's capacity and allocation, each GPU's allocation; plus the scheduling
latency histogram, observed as the scheduler stores its own ``SessionScheduled`` events, the
passes it ran and its consumers' lag. Reads only what the scheduler keeps; no subjects.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from prometheus_client import Histogram
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from commands.node.aggregate import Node
from commands.session.rules import StatusChange
from events.bus import Bus
from events.domain.session import SessionScheduled
from events.metrics import Metrics, consumer_lag
from events.writes import Committed, Store, StoreAround, Write
from schemas.session import SessionStatus
from services.scheduler.state import SchedulerState

if TYPE_CHECKING:
    from services.scheduler.service import Scheduler

LATENCY_BUCKETS = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400,
)  # fmt: skip
"""Seconds from request to placement: milliseconds on an idle cluster, hours in a busy one."""
NODE_STATES = ("schedulable", "cordoned", "draining", "drained", "lost")
CPU_MILLI, GPU_HUNDREDTHS = 1000, 100


def node_state(node: Node) -> str:
    """As the API's ``Node.state`` says it (``services.gateway.cluster.types``)."""
    if node.lost:
        return "lost"
    if node.cordoned and node.draining:
        return "draining" if node.allocations else "drained"
    return "cordoned" if node.cordoned else "schedulable"


def pending_since(history: Sequence[StatusChange]) -> datetime | None:
    """When the session's last stretch of PENDING began (a requeued session waits again from
    its requeue), whether or not a later change follows it."""
    since = None
    for change in reversed(history):
        if change.status is SessionStatus.PENDING:
            since = change.at
        elif since is not None:
            break
    return since


class SchedulerCollector:
    """Everything read from the folded state, per scrape (one pass over sessions and nodes)."""

    def __init__(
        self,
        state: SchedulerState,
        queues: dict[str, list[str]],
        clock: Callable[[], datetime],
        passes: Callable[[], int] = lambda: 0,
    ) -> None:
        self._state = state
        self._queues = queues
        """Resource group -> the queue the last pass left (what ``queueLength`` shows)."""
        self._clock = clock
        self._passes = passes

    def collect(self) -> Iterable[Metric]:
        yield from self._sessions()
        yield from self._queue()
        yield from self._nodes()
        yield from self._gpus()
        passes = CounterMetricFamily(
            "jetyard_scheduler_passes", "Decision passes this scheduler ran", labels=[]
        )
        passes.add_metric([], self._passes())
        yield passes

    def _sessions(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "jetyard_sessions",
            "Sessions by status and resource group (every session the log holds)",
            labels=["status", "resource_group"],
        )
        tally = Tally(
            (t.session.status.value, t.session.spec.resource_group)
            for t in self._state.sessions.values()
        )
        groups = {group for _, group in tally} | set(self._queues)
        for group in sorted(groups):
            for status in SessionStatus:
                family.add_metric([status.value, group], tally.get((status.value, group), 0))
        yield family

    def _queue(self) -> Iterable[Metric]:
        length = GaugeMetricFamily(
            "jetyard_queue_length",
            "Sessions in a resource group's placement queue, as the last pass left it",
            labels=["resource_group"],
        )
        oldest = GaugeMetricFamily(
            "jetyard_queue_oldest_wait_seconds",
            "How long the longest-waiting session of the queue has been PENDING",
            labels=["resource_group"],
        )
        mean = GaugeMetricFamily(
            "jetyard_queue_mean_wait_seconds",
            "How long the queue's sessions have been PENDING, on average",
            labels=["resource_group"],
        )
        now, sessions = self._clock(), self._state.sessions
        for group, queue in sorted(self._queues.items()):
            length.add_metric([group], len(queue))
            waits = []
            for session_id in queue:
                tracked = sessions.get(session_id)
                if tracked is None or tracked.session.status is not SessionStatus.PENDING:
                    continue
                since = pending_since(tracked.session.history)
                if since is not None:
                    waits.append(max(0.0, (now - since).total_seconds()))
            oldest.add_metric([group], max(waits, default=0.0))
            mean.add_metric([group], sum(waits) / len(waits) if waits else 0.0)
        yield from (length, oldest, mean)

    def _nodes(self) -> Iterable[Metric]:
        states = GaugeMetricFamily(
            "jetyard_nodes",
            "Nodes by state (schedulable, cordoned, draining, drained, lost) and resource group",
            labels=["state", "resource_group"],
        )
        capacity = GaugeMetricFamily(
            "jetyard_node_capacity",
            "What a node offers: cpu in cores, memory in bytes, gpu in devices",
            labels=["node", "hostname", "resource_group", "resource"],
        )
        allocated = GaugeMetricFamily(
            "jetyard_node_allocated",
            "What is allocated on a node: cpu in cores, memory in bytes, gpu in devices",
            labels=["node", "hostname", "resource_group", "resource"],
        )
        tally: Tally[tuple[str, str]] = Tally()
        for node_id, node in sorted(self._state.nodes.items()):
            if node.removed:
                continue  # out of the cluster for good, as it is out of the `nodes` view
            tally[(node_state(node), node.resource_group)] += 1
            labels = [node_id, node.hostname, node.resource_group]
            for family, slots in ((capacity, node.capacity), (allocated, node.allocated)):
                family.add_metric([*labels, "cpu"], slots.cpu_milli / CPU_MILLI)
                family.add_metric([*labels, "memory"], slots.memory_bytes)
                family.add_metric([*labels, "gpu"], slots.gpu_hundredths / GPU_HUNDREDTHS)
        for group in sorted({group for _, group in tally}):
            for state in NODE_STATES:
                states.add_metric([state, group], tally.get((state, group), 0))
        yield from (states, capacity, allocated)

    def _gpus(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "jetyard_gpu_allocated",
            "How much of a GPU is allocated, in devices (1: held whole or every share taken)",
            labels=["node", "hostname", "index", "uuid", "model"],
        )
        for node_id, node in sorted(self._state.nodes.items()):
            if node.removed:
                continue
            use = node.device_use()
            for device in node.devices:
                whole, shared = use.get(device.index, (False, 0))
                held = 1.0 if whole else shared / GPU_HUNDREDTHS
                labels = [node_id, node.hostname, str(device.index), device.uuid, device.name]
                family.add_metric(labels, held)
        yield family


class LatencyObserved(StoreAround):
    """The store a decision pass writes through: once its writes are stored, each
    ``SessionScheduled`` among them is observed in the scheduling latency histogram (only the
    replica that placed a session observes it, once). Everything else goes to ``store``."""

    def __init__(self, store: Store, state: SchedulerState, latency: Histogram) -> None:
        super().__init__(store)
        self._state = state
        self._latency = latency
        self._by_group: dict[str, Histogram] = {}
        """Each group's child of ``latency`` (``labels`` looks it up under a lock each time)."""

    async def commit(self, writes: list[Write]) -> Committed:
        committed = await self.store.commit(writes)
        for write in writes:
            for envelope in write.events:
                if envelope.name == SessionScheduled.event_name:
                    self._observe(envelope.aggregate_id, envelope.occurred_at)
        return committed

    def _observe(self, session_id: str, placed_at: datetime) -> None:
        tracked = self._state.sessions.get(session_id)
        if tracked is None:
            return
        since = pending_since(tracked.session.history)
        if since is not None:
            group = tracked.session.spec.resource_group
            child = self._by_group.get(group)
            if child is None:
                child = self._by_group[group] = self._latency.labels(group)
            child.observe(max(0.0, (placed_at - since).total_seconds()))


def latency_histogram(metrics: Metrics) -> Histogram:
    return Histogram(
        "jetyard_scheduling_latency_seconds",
        "From a session's request (or requeue) to its placement, by resource group",
        ["resource_group"],
        buckets=LATENCY_BUCKETS,
        registry=metrics.registry,
    )


def watch_scheduler(
    metrics: Metrics, scheduler: Scheduler, bus: Bus, clock: Callable[[], datetime]
) -> None:
    """Register what the scheduler's state says, and the lag of its fold and its two durable
    command consumers."""
    metrics.add(
        SchedulerCollector(scheduler.state, scheduler.published, clock, lambda: scheduler.passes)
    )
    lag = consumer_lag(metrics, bus)
    lag.fold(scheduler.fold)
    lag.durable(scheduler.runner.durable)
    lag.durable(scheduler.node_runner.durable)
