"""Per-key request rate limits: a token bucket per key, in memory. ``check`` is pure (the time
is passed in; ``take`` reads the clock given at construction); reads and writes no subject.

A bucket holds ``limit`` tokens (the burst) and refills at ``limit`` per minute, so a key may
send ``limit`` requests at once and then ``limit`` per minute. This in-memory limiter is what
one process falls back to; the gateway shares its buckets with its other replicas on NATS
(``ratelimit_shared.py``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class RateDecision:
    allowed: bool
    limit: int
    remaining: int
    """Whole requests left in the bucket after this one."""
    reset_s: int
    """Seconds until the bucket is full again."""
    retry_after_s: int
    """When refused: seconds until one request would be allowed (0 when allowed)."""

    def headers(self) -> dict[str, str]:
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_s),
            "X-RateLimit-Window": "60",
        }
        if not self.allowed:
            headers["Retry-After"] = str(self.retry_after_s)
        return headers


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


def refill(
    held: tuple[float, float] | None, limit: int, now: float
) -> tuple[RateDecision, float, float]:
    """One request against a bucket that held ``(tokens, at)`` (None: a new, full one):
    the decision and the bucket's new ``(tokens, at)``. Pure."""
    if limit < 1:
        raise ValueError(f"a rate limit must be at least 1 request per minute, not {limit}")
    rate = limit / 60.0  # tokens per second
    if held is None:
        tokens, at = float(limit), now
    else:
        # A clock that steps back must not mint tokens; a lowered limit caps the bucket.
        tokens, at = held
        tokens = min(float(limit), tokens + max(0.0, now - at) * rate)
        at = max(at, now)
    allowed = tokens >= 1.0
    if allowed:
        tokens -= 1.0
    missing = limit - tokens
    decision = RateDecision(
        allowed=allowed,
        limit=limit,
        remaining=math.floor(tokens),
        reset_s=math.ceil(missing / rate - 1e-9),
        retry_after_s=0 if allowed else math.ceil((1.0 - tokens) / rate - 1e-9),
    )
    return decision, tokens, at


class Limiter(Protocol):
    async def take(self, key: str, limit: int) -> RateDecision: ...


class LocalLimiter:
    """A process's own limiter behind the ``Limiter`` protocol (tests, no shared bucket)."""

    def __init__(self) -> None:
        self._limiter = RateLimiter()

    async def take(self, key: str, limit: int) -> RateDecision:
        return self._limiter.take(key, limit)


class RateLimiter:
    """``take(key, limit)`` once per request (``check`` with the time given, for tests)."""

    def __init__(
        self, max_keys: int = 100_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._buckets: dict[str, _Bucket] = {}
        self._max_keys = max_keys
        self._clock = clock

    def take(self, key: str, limit: int) -> RateDecision:
        return self.check(key, limit, self._clock())

    def check(self, key: str, limit: int, now: float) -> RateDecision:
        bucket = self._buckets.get(key)
        if bucket is None:
            self._make_room(now)
        decision, tokens, at = refill(
            None if bucket is None else (bucket.tokens, bucket.at), limit, now
        )
        self._buckets[key] = _Bucket(tokens=tokens, at=at)
        return decision

    def __len__(self) -> int:
        return len(self._buckets)

    def _make_room(self, now: float) -> None:
        if len(self._buckets) < self._max_keys:
            return
        # A full bucket is the same as no bucket, and any bucket refills within a minute
        # (it gains its whole limit per minute): forget those idle that long first.
        idle = [key for key, b in self._buckets.items() if now - b.at >= 60.0]
        for key in idle:
            del self._buckets[key]
        if len(self._buckets) >= self._max_keys:
            # Still full of busy keys: drop the stalest (it only loses that key's debt).
            oldest = min(self._buckets, key=lambda key: self._buckets[key].at)
            del self._buckets[oldest]
