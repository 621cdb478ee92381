"""The load board the serving controller's rules and the gateway's live traffic read
(``schemas.serving_load``): rates from totals' differences across proxies (a restarted proxy
counted from its restart), in-flight now, latency quantiles from bucket differences worked out
by hand, silent proxies forgotten."""

from __future__ import annotations

import json

import pytest

from schemas.serving_load import (
    LATENCY_BOUNDS_MS,
    PROXY_GONE_S,
    LoadBoard,
    latency_bucket,
    parse_report,
    quantile_of,
)

EMPTY = [0] * (len(LATENCY_BOUNDS_MS) + 1)


def buckets(**at_bound: int) -> list[int]:
    """Counts per bucket, given as ``ms<bound>=count`` (``over`` for the last bucket)."""
    counts = list(EMPTY)
    for key, count in at_bound.items():
        index = len(LATENCY_BOUNDS_MS) if key == "over" else LATENCY_BOUNDS_MS.index(int(key[2:]))
        counts[index] = count
    return counts


def report(proxy: str, at: float, requests: int, inflight: int, latency: list[int]) -> bytes:
    load = {"requests": requests, "inflight": inflight, "latency_ms": latency, "replicas": {}}
    return json.dumps({"proxy": proxy, "at": at, "endpoints": {"e": load}}).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_rates_add_up_over_proxies_and_a_restart_counts_from_zero() -> None:
    clock = Clock()
    board = LoadBoard(clock)
    assert board.rate("e", 10) is None and board.inflight("e") is None  # no proxy heard
    board.take(report("p1", 100, 10, 1, EMPTY))
    board.take(report("p1", 110, 60, 3, EMPTY))  # 50 in 10 s
    board.take(report("p2", 200, 500, 0, EMPTY))
    board.take(report("p2", 205, 20, 2, EMPTY))  # restarted: 20 since, in 5 s
    assert board.rate("e", 30) == pytest.approx(5.0 + 4.0)
    assert board.inflight("e") == 5
    assert board.rate("other", 30) == 0.0
    clock.now += PROXY_GONE_S + 1
    assert board.rate("e", 30) is None  # both silent: gone


def test_latency_quantiles_come_from_what_was_answered_in_the_window() -> None:
    board = LoadBoard(Clock())
    board.take(report("p1", 100, 0, 0, buckets(ms10=100)))  # before the window: not counted
    board.take(report("p1", 140, 0, 0, buckets(ms10=100)))
    board.take(report("p1", 150, 0, 0, buckets(ms10=190, ms50=10)))
    # In the window: 90 in (5, 10] ms, 10 in (25, 50] ms. p50: rank 50 of 100, the 50th of
    # the 90 in (5, 10]: 5 + 5 * 50/90. p99: rank 99, the 9th of the 10 in (25, 50].
    assert board.latency_ms("e", 0.5, 15) == pytest.approx(5 + 5 * 50 / 90)
    assert board.latency_ms("e", 0.99, 15) == pytest.approx(25 + 25 * 9 / 10)
    assert board.latency_ms("other", 0.5, 15) is None


def test_quantiles_of_the_edges() -> None:
    assert quantile_of(EMPTY, 0.5) is None
    assert quantile_of(buckets(over=4), 0.99) == float(LATENCY_BOUNDS_MS[-1])
    assert quantile_of(buckets(ms5=1), 1.0) == 5.0
    assert [latency_bucket(ms) for ms in (0, 5, 5.1, 30_000, 30_001)] == [0, 0, 1, 11, 12]


def test_a_report_that_is_not_one_is_dropped() -> None:
    board = LoadBoard(Clock())
    for bad in (b"{", b"[]", b'{"proxy": "p"}', b'{"proxy": "p", "at": "x"}'):
        board.take(bad)
        with pytest.raises(ValueError, match="not a load report"):
            parse_report(bad)
    assert not board.live()


def test_a_replicas_in_flight_adds_up_over_the_live_proxies() -> None:
    # What a retired replica is drained of before its session is ended.
    clock = Clock()
    board = LoadBoard(clock)
    assert board.replica_inflight("e", 1) is None  # no proxy heard: nothing to wait for

    def with_replicas(proxy: str, at: float, inflight: dict[str, int]) -> bytes:
        replicas = {n: {"requests": 9, "inflight": i} for n, i in inflight.items()}
        load = {"requests": 9, "inflight": sum(inflight.values()), "replicas": replicas}
        return json.dumps({"proxy": proxy, "at": at, "endpoints": {"e": load}}).encode()

    board.take(with_replicas("p1", 100, {"1": 2, "2": 0}))
    board.take(with_replicas("p2", 100, {"1": 1}))
    assert (board.replica_inflight("e", 1), board.replica_inflight("e", 2)) == (3, 0)
    assert board.replica_inflight("e", 7) == 0 and board.replica_inflight("other", 1) == 0
    clock.now += PROXY_GONE_S + 1
    assert board.replica_inflight("e", 1) is None
