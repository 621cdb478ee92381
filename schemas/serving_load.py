"""The app proxies' load reports and what is read from them: each proxy replica publishes, every
second on core NATS ``jy.serving.load.<proxy id>`` (``schemas.subjects.SERVING_LOAD_PREFIX``; not
kept), a JSON object

    {"proxy": "<proxy id>", "at": <unix seconds>,
     "endpoints": {"<endpoint id>": {"requests": <total>, "inflight": <now>,
                   "latency_ms": [<total in each bucket of LATENCY_BOUNDS_MS, then above>],
                   "replicas": {"<number>": {"requests": <total>, "inflight": <now>}}}}}

with totals since that proxy started. ``LoadBoard`` keeps each proxy's recent reports and
answers, over all live proxies: the request rate over a window (from the totals' differences; a
total that went down is a restarted proxy, whose new total is what it counted since), requests
in flight now (per endpoint and per replica: what a retired replica is drained of), and latency
quantiles over a window (from the buckets' differences). The serving
controller's scaling rules and the gateway's live traffic read the same board. A proxy silent
for ``PROXY_GONE_S`` counts as gone; with none live, nothing is measured (None). Pure (the
clock is passed in); the subject is the caller's.
"""

from __future__ import annotations

import bisect
import json
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)

LATENCY_BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000)
"""Upper bounds of the latency buckets (a request of exactly a bound falls in its bucket); one
more bucket counts what took longer."""
PROXY_GONE_S = 5.0
KEPT_S = 3600.0 + 60.0
"""How much of a proxy's reports is kept: the longest scaling rule's window, and a margin."""


def latency_bucket(ms: float) -> int:
    """The index of the bucket a request that took ``ms`` falls in."""
    return bisect.bisect_left(LATENCY_BOUNDS_MS, ms)


@dataclass(frozen=True, slots=True)
class Counts:
    requests: int
    """Since the proxy started."""
    inflight: int
    latency: tuple[int, ...]
    """Per bucket, since the proxy started (empty from a proxy that does not count them)."""
    replicas: dict[int, int]
    """Replica number -> its requests in flight now."""


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    """The proxy's clock (unix seconds)."""
    counts: dict[str, Counts]
    """Endpoint id -> its counts."""


NONE = Counts(0, 0, (), {})


def parse_report(data: bytes) -> tuple[str, Sample]:
    """(proxy id, sample) of a report; ``ValueError`` when it is not one."""
    try:
        report = json.loads(data)
        proxy, at = str(report["proxy"]), float(report["at"])
        counts = {
            str(endpoint): Counts(
                int(load.get("requests", 0)),
                int(load.get("inflight", 0)),
                tuple(int(n) for n in load.get("latency_ms", ())),
                {
                    int(number): int(replica.get("inflight", 0))
                    for number, replica in dict(load.get("replicas") or {}).items()
                },
            )
            for endpoint, load in dict(report.get("endpoints") or {}).items()
        }
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a load report: {exc!r}") from None
    return proxy, Sample(at, counts)


class LoadBoard:
    """The proxies' recent reports. ``clock``: this process's unix time (for liveness)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._proxies: dict[str, deque[Sample]] = {}
        self._heard: dict[str, float] = {}

    def take(self, data: bytes) -> None:
        """Keep one report; a malformed one is logged and dropped."""
        try:
            proxy, sample = parse_report(data)
        except ValueError as exc:
            log.warning("dropped a malformed load report: %s", exc)
            return
        samples = self._proxies.setdefault(proxy, deque())
        if samples and sample.at <= samples[-1].at:
            return  # out of order, or repeated
        samples.append(sample)
        while samples and sample.at - samples[0].at > KEPT_S:
            samples.popleft()
        self._heard[proxy] = self._clock()

    def _live(self) -> list[deque[Sample]]:
        now = self._clock()
        gone = [p for p, heard in self._heard.items() if now - heard > PROXY_GONE_S]
        for proxy in gone:
            del self._heard[proxy], self._proxies[proxy]
        return [s for s in self._proxies.values() if s]

    def _spans(self, window_s: float) -> list[tuple[Sample, Sample]]:
        """Per live proxy, its first report within the window and its last."""
        spans = []
        for samples in self._live():
            last = samples[-1]
            first = next((s for s in samples if last.at - s.at <= window_s), last)
            spans.append((first, last))
        return spans

    def live(self) -> bool:
        return bool(self._live())

    def rate(self, endpoint_id: str, window_s: float) -> float | None:
        """Requests per second to the endpoint over the last ``window_s``, all proxies."""
        spans = self._spans(window_s)
        if not spans:
            return None
        total = 0.0
        for first, last in spans:
            elapsed = last.at - first.at
            if elapsed > 0:
                now = last.counts.get(endpoint_id, NONE).requests
                then = first.counts.get(endpoint_id, NONE).requests
                total += (now - then if now >= then else now) / elapsed
        return total

    def inflight(self, endpoint_id: str) -> float | None:
        live = self._live()
        if not live:
            return None
        return float(sum(s[-1].counts.get(endpoint_id, NONE).inflight for s in live))

    def replica_inflight(self, endpoint_id: str, replica: int) -> int | None:
        """Requests in flight to one replica now, all live proxies (a proxy that does not list
        it has none there); None when no proxy is live."""
        live = self._live()
        if not live:
            return None
        return sum(s[-1].counts.get(endpoint_id, NONE).replicas.get(replica, 0) for s in live)

    def latency_ms(self, endpoint_id: str, quantile: float, window_s: float) -> float | None:
        """The ``quantile`` (0-1) of the latencies of the requests answered in the window, all
        proxies, interpolated within its bucket; None when none was answered."""
        buckets = [0] * (len(LATENCY_BOUNDS_MS) + 1)
        for first, last in self._spans(window_s):
            if first is last:
                continue  # one report: no difference to take yet
            now = last.counts.get(endpoint_id, NONE).latency[: len(buckets)]
            then = first.counts.get(endpoint_id, NONE).latency
            restarted = len(then) != len(now) or any(b < a for a, b in zip(then, now, strict=True))
            for i, count in enumerate(now):
                buckets[i] += count if restarted else count - then[i]
        return quantile_of(buckets, quantile)


def quantile_of(buckets: Sequence[int], quantile: float) -> float | None:
    """The quantile of counts per ``LATENCY_BOUNDS_MS`` bucket (linear within a bucket; the
    last, unbounded bucket answers its lower bound)."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = quantile * total
    seen = 0
    for i, count in enumerate(buckets):
        if count and seen + count >= rank:
            low = LATENCY_BOUNDS_MS[i - 1] if i > 0 else 0
            if i >= len(LATENCY_BOUNDS_MS):
                return float(low)
            return low + (LATENCY_BOUNDS_MS[i] - low) * (rank - seen) / count
        seen += count
    return float(LATENCY_BOUNDS_MS[-1])
