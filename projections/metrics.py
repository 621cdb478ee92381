"""The projector's Prometheus metrics (docs/metrics.md): the log's last sequence (every event
ever appended, by any writer: the log is never trimmed), each view's position and the views'
lag behind the log. Reads ``JY_EVENTS``' last sequence (one request per scrape); no subjects.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from events.bus import Bus
from events.metrics import Metrics, consumer_lag
from events.store import EventStore
from projections.runner import Projector


class ProjectionCollector:
    def __init__(self, projector: Projector, store: EventStore) -> None:
        self._projector = projector
        self._store = store
        self.last_seq: int | None = None

    async def refresh(self) -> None:
        self.last_seq = await self._store.stream_last_seq()

    async def lag(self) -> int | None:
        """The views' lag: events on the log past the position every view has committed."""
        if self.last_seq is None:
            return None
        return max(0, self.last_seq - self._projector.position)

    def collect(self) -> Iterable[Metric]:
        last = GaugeMetricFamily(
            "jetyard_log_last_sequence",
            "The last sequence of JY_EVENTS: every event appended so far, by every writer",
        )
        if self.last_seq is not None:
            last.add_metric([], self.last_seq)
        positions = GaugeMetricFamily(
            "jetyard_view_position",
            "The last stream sequence a view has committed",
            labels=["view"],
        )
        for view, position in sorted(self._projector.positions.items()):
            positions.add_metric([view], position)
        yield from (last, positions)


def projection_metrics(projector: Projector, bus: Bus) -> Metrics:
    metrics = Metrics()
    collector = ProjectionCollector(projector, EventStore(bus))
    metrics.add(collector)
    metrics.before_scrape(collector.refresh)  # before the lag, which reads what it read
    consumer_lag(metrics).add(projector.consumer, "views", collector.lag)
    return metrics
