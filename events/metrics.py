"""Prometheus metrics of one service (``docs/metrics.md``): its registry, the counters every
process shares (events appended), consumers' lag, and ``/metrics`` as an ASGI app (served by
the service's own HTTP listener, or by ``httpserver.metrics`` for the services that serve no
HTTP). Reads, at scrape time only, the consumer info of the consumers whose lag it reports
(``$JS.API.CONSUMER.INFO``); writes nothing.

Figures are computed from what a service already keeps (its folded state, its consumers) when
Prometheus asks, not counted on every change: a scrape every 15 s costs one pass over the
state, a hot path costs nothing. What cannot be read without I/O (a consumer's pending count,
the log's last sequence) is read by an async ``before_scrape`` hook, then rendered.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import Receive, Scope, Send

from events.bus import Bus
from events.writes import Write
from schemas.subjects import COMMANDS_STREAM

if TYPE_CHECKING:  # the fold's module imports the store, which counts here
    from events.fold import Fold

log = logging.getLogger(__name__)

Refresh = Callable[[], Awaitable[None]]

SCRAPE_READ_TIMEOUT_S = 2.0
"""A ``before_scrape`` read that takes longer is given up and the page rendered without it:
Prometheus' own scrape timeout is 10 s by default."""

PROCESS = CollectorRegistry()
"""What every service of this process shares; each service's registry includes it."""
EVENTS_APPENDED = Counter(
    "jetyard_events_appended",
    "Events this process stored on JY_EVENTS, by aggregate type",
    ["aggregate"],
    registry=PROCESS,
)


def count_appended(writes: Iterable[Write]) -> None:
    """Called by the event store once a write is stored (also one recovered after a lost ack)."""
    for write in writes:
        EVENTS_APPENDED.labels(write.aggregate.type.value).inc(len(write.events))


class _Included:
    """Another registry's metrics in this one (no names: never a duplicate)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        return self._registry.collect()


class Metrics:
    """One service's metrics: a registry of its own (two services in one process, as in the
    tests, never collide), the process' shared counters, and the reads done before a scrape.
    Called as an ASGI app it answers ``GET /metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_Included(PROCESS))
        self._before: list[Refresh] = []

    def add(self, collector: Collector) -> None:
        self.registry.register(collector)

    def before_scrape(self, refresh: Refresh) -> None:
        self._before.append(refresh)

    async def render(self) -> bytes:
        """The Prometheus text format, after the reads that need I/O (each bounded; one that
        fails leaves its last figures and is logged, the rest is still rendered)."""
        for refresh in self._before:
            try:
                await asyncio.wait_for(refresh(), SCRAPE_READ_TIMEOUT_S)
            except Exception as exc:
                log.warning("metrics: a read before the scrape failed (%r)", exc)
        return generate_latest(self.registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, b"GET /metrics\n", "text/plain; charset=utf-8")
            return
        body = await self.render()
        await _answer(send, 200, b"" if scope["method"] == "HEAD" else body)


async def _answer(
    send: Send, status: int, body: bytes, kind: str = CONTENT_TYPE_PLAIN_0_0_4
) -> None:
    headers = [(b"content-type", kind.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ConsumerLag:
    """``jetyard_consumer_lag{consumer, kind}``: what a consumer has yet to read, read before
    each scrape. A fold's lag (``kind="fold"``) is what its ordered consumer still has pending;
    a durable command consumer's (``kind="commands"``) the server's pending plus
    unacknowledged count; the projections hand in their own (``kind="views"``)."""

    def __init__(self, bus: Bus | None = None) -> None:
        self._bus = bus
        """Needed only for durable consumers."""
        self._reads: dict[tuple[str, str], Callable[[], Awaitable[int | None]]] = {}
        self._read: dict[tuple[str, str], int] = {}

    def add(self, consumer: str, kind: str, read: Callable[[], Awaitable[int | None]]) -> None:
        self._reads[(consumer, kind)] = read

    def fold(self, fold: Fold[Any]) -> None:
        """A fold, under the name its quarantine entries carry."""

        async def read() -> int | None:
            return await fold.pending() if fold.caught_up.is_set() else None

        self.add(fold.state.consumer, "fold", read)

    def durable(self, name: str, stream: str = COMMANDS_STREAM) -> None:
        bus = self._bus
        if bus is None:
            raise ValueError("a durable consumer's lag is read through a bus: hand one in")

        async def read() -> int | None:
            info = await bus.js.consumer_info(stream, name)
            return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

        self.add(name, "commands", read)

    async def refresh(self) -> None:
        for key, read in self._reads.items():
            try:
                value = await read()
            except Exception as exc:  # not created yet, or NATS away: no figure this time
                log.debug("metrics: no lag for %s (%r)", key, exc)
                value = None
            if value is None:
                self._read.pop(key, None)
            else:
                self._read[key] = value

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "jetyard_consumer_lag",
            "Events or commands a consumer has yet to read or answer",
            labels=["consumer", "kind"],
        )
        for (consumer, kind), value in sorted(self._read.items()):
            family.add_metric([consumer, kind], value)
        yield family


def consumer_lag(metrics: Metrics, bus: Bus | None = None) -> ConsumerLag:
    """A ``ConsumerLag`` registered on ``metrics`` (with its read before each scrape)."""
    lag = ConsumerLag(bus)
    metrics.add(lag)
    metrics.before_scrape(lag.refresh)
    return lag


def lag_metrics(fold: Fold[Any], bus: Bus | None = None, durables: Iterable[str] = ()) -> Metrics:
    """The metrics of a service that reports no figures of its own: the process' shared
    counters, its fold's lag and its durable command consumers' (``bus``: for those)."""
    metrics = Metrics()
    lag = consumer_lag(metrics, bus)
    lag.fold(fold)
    for durable in durables:
        lag.durable(durable)
    return metrics
