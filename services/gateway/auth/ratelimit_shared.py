"""Rate limits shared by every gateway replica: each key's token bucket lives in the
``jy-ratelimits`` bucket (entries expire two minutes after their last use) and is updated with
compare-and-set, so N gateways behind a balancer still allow a key its limit, not N times it.
Reads and writes ``jy-ratelimits``.

Within one process the takes of one key are queued behind each other (a page opening many
subscriptions at once must not race itself), so compare-and-set races happen only between
replicas. NATS failing falls back to this process's own bucket for that request (an API that
stops answering because its limiter is unreachable would be worse than a looser limit); a
request that loses the race against other replicas every time is refused (that many at once on
one key is the flood a limit is for).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Callable

import nats.errors
import nats.js.errors
from nats.js.kv import KeyValue

from events.bus import Bus
from schemas.subjects import RATELIMITS_BUCKET
from services.gateway.auth.ratelimit import RateDecision, RateLimiter, refill

log = logging.getLogger(__name__)

ATTEMPTS = 6
_UNSAFE = re.compile(r"[^A-Za-z0-9_=-]")


class SharedRateLimiter:
    def __init__(self, kv: KeyValue, clock: Callable[[], float] = time.time) -> None:
        self._kv = kv
        self._clock = clock
        self._local = RateLimiter(clock=clock)
        self._queues: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per key: the lock its takes queue on here, and how many hold or wait for it."""

    @classmethod
    async def open(cls, bus: Bus) -> SharedRateLimiter:
        return cls(await bus.js.key_value(RATELIMITS_BUCKET))

    async def take(self, key: str, limit: int) -> RateDecision:
        name = _UNSAFE.sub("_", key)[:200] or "_"
        lock, users = self._queues.get(name) or (asyncio.Lock(), 0)
        self._queues[name] = (lock, users + 1)
        try:
            async with lock:
                return await self._take(name, key, limit)
        finally:
            lock, users = self._queues[name]
            if users == 1:
                del self._queues[name]
            else:
                self._queues[name] = (lock, users - 1)

    async def _take(self, name: str, key: str, limit: int) -> RateDecision:
        try:
            for _ in range(ATTEMPTS):
                decided = await self._try(name, limit)
                if decided is not None:
                    return decided
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError, ValueError) as exc:
            log.warning("shared rate limit unavailable (%r): limiting in this process", exc)
            return self._local.take(key, limit)
        # Lost every race: so many requests on one key at once is the flood a limit is for.
        return RateDecision(allowed=False, limit=limit, remaining=0, reset_s=60, retry_after_s=1)

    async def _try(self, name: str, limit: int) -> RateDecision | None:
        try:
            entry = await self._kv.get(name)
        except nats.js.errors.KeyNotFoundError:
            entry = None
        held: tuple[float, float] | None = None
        if entry is not None and entry.value:
            stored = json.loads(entry.value)
            held = (float(stored["tokens"]), float(stored["at"]))
        decision, tokens, at = refill(held, limit, self._clock())
        data = json.dumps({"tokens": tokens, "at": at}).encode()
        try:
            if entry is None:
                await self._kv.create(name, data)
            else:
                await self._kv.update(name, data, last=entry.revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            return None  # another replica took from this bucket first: read it again
        return decision
