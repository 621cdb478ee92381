"""Per-key token buckets: a burst of the limit, then the limit per minute, and the numbers the
X-RateLimit headers carry. The clock is a number the test moves."""

from __future__ import annotations

import pytest

from services.gateway.auth.ratelimit import RateLimiter


def test_a_burst_of_the_limit_passes_and_the_next_request_is_refused() -> None:
    limiter = RateLimiter()

    decisions = [limiter.check("AK1", 5, now=100.0) for _ in range(6)]

    assert [d.allowed for d in decisions] == [True] * 5 + [False]
    assert [d.remaining for d in decisions] == [4, 3, 2, 1, 0, 0]
    refused = decisions[-1]
    assert refused.retry_after_s == 12  # one token per 60/5 s
    assert refused.reset_s == 60
    assert refused.headers() == {
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": "60",
        "X-RateLimit-Window": "60",
        "Retry-After": "12",
    }
    assert "Retry-After" not in decisions[0].headers()


def test_tokens_come_back_at_the_limit_per_minute() -> None:
    limiter = RateLimiter()
    for _ in range(60):
        assert limiter.check("AK1", 60, now=0.0).allowed
    assert not limiter.check("AK1", 60, now=0.5).allowed

    assert limiter.check("AK1", 60, now=1.0).allowed
    assert not limiter.check("AK1", 60, now=1.0).allowed
    after_a_while = limiter.check("AK1", 60, now=31.0)
    assert after_a_while.allowed
    assert after_a_while.remaining == 29
    assert after_a_while.reset_s == 31  # 31 tokens short of full, one a second


def test_keys_are_limited_separately() -> None:
    limiter = RateLimiter()
    assert limiter.check("AK1", 1, now=0.0).allowed
    assert not limiter.check("AK1", 1, now=0.0).allowed

    assert limiter.check("AK2", 1, now=0.0).allowed


def test_a_clock_stepping_back_mints_no_tokens_and_a_lower_limit_caps_the_bucket() -> None:
    limiter = RateLimiter()
    for _ in range(10):
        limiter.check("AK1", 10, now=50.0)
    assert not limiter.check("AK1", 10, now=0.0).allowed

    limiter.check("AK2", 100, now=0.0)
    lowered = limiter.check("AK2", 3, now=0.0)
    assert lowered.allowed
    assert lowered.remaining == 2


def test_memory_is_bounded_by_forgetting_idle_keys_first() -> None:
    limiter = RateLimiter(max_keys=3)
    limiter.check("idle", 10, now=0.0)
    limiter.check("busy1", 10, now=59.0)
    limiter.check("busy2", 10, now=59.0)
    for _ in range(10):
        limiter.check("busy1", 10, now=60.0)

    limiter.check("new", 10, now=61.0)

    assert len(limiter) == 3
    assert not limiter.check("busy1", 10, now=61.0).allowed  # its debt was kept


def test_a_limit_below_one_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RateLimiter().check("AK1", 0, now=0.0)


def test_take_reads_the_clock_it_was_given() -> None:
    now = [0.0]
    limiter = RateLimiter(clock=lambda: now[0])
    assert limiter.take("AK1", 1).allowed
    assert not limiter.take("AK1", 1).allowed

    now[0] = 60.0

    assert limiter.take("AK1", 1).allowed
