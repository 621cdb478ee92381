"""The metrics the scaling rules read: request rate and requests in flight from the app
proxies' load reports (``schemas.serving_load.LoadBoard``, fed from core NATS
``jy.serving.load.*``), CPU and GPU use from the agents' activity reports of the replicas'
sessions. With no live proxy, request metrics are not measured (None) and their rules wait; a
live proxy that does not list an endpoint saw no request for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from schemas.activity import ActivitySource
from schemas.serving import ScalingMetric, ScalingRule
from schemas.serving_load import LoadBoard


def mean_use(
    reports: Iterable[Iterable[tuple[datetime, ActivitySource, float]]],
    source: ActivitySource,
    window_s: float,
    now: datetime,
) -> float | None:
    """The mean over the replicas of each one's mean use over the window. A replica without a
    report was under the agents' busy floor: it counts as 0. None without replicas."""
    since = now - timedelta(seconds=window_s)
    means: list[float] = []
    for kept in reports:
        values = [pct for at, src, pct in kept if src is source and at >= since]
        means.append(sum(values) / len(values) if values else 0.0)
    return sum(means) / len(means) if means else None


def per_replica(value: float | None, replicas: int) -> float | None:
    return None if value is None else value / max(1, replicas)


def rule_value(
    rule: ScalingRule,
    endpoint_id: str,
    serving: int,
    board: LoadBoard,
    use: Callable[[ActivitySource, float], float | None],
) -> float | None:
    """The rule's metric now: rates and in-flight counts per serving replica (all of them on
    one while none serves: a request waiting for a cold start counts)."""
    if rule.metric is ScalingMetric.RPS:
        return per_replica(board.rate(endpoint_id, rule.window_s), serving)
    if rule.metric is ScalingMetric.INFLIGHT:
        return per_replica(board.inflight(endpoint_id), serving)
    source = ActivitySource.CPU if rule.metric is ScalingMetric.CPU else ActivitySource.GPU
    return use(source, rule.window_s)
