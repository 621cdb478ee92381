"""The sealer's figures, read from it at scrape time (docs/metrics.md)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from services.sealer.service import Sealer


class SealerCollector:
    def __init__(self, sealer: Sealer) -> None:
        self.sealer = sealer
        self.log_end = 0
        """The log's last position, read before each scrape."""

    def collect(self) -> Iterator[Metric]:
        sealer = self.sealer
        sealed = sealer.last.last if sealer.last is not None else 0
        yield GaugeMetricFamily(
            "jetyard_seal_position", "The last log position a stored seal covers", sealed
        )
        yield GaugeMetricFamily(
            "jetyard_seal_lag_events",
            "Events stored on the log and not sealed yet",
            max(0, self.log_end - sealed),
        )
        yield CounterMetricFamily(
            "jetyard_seals_written", "Seals this sealer stored", sealer.written
        )
        yield CounterMetricFamily(
            "jetyard_seals_lost",
            "Seals another sealer stored first (this one went on from them)",
            sealer.lost,
        )
