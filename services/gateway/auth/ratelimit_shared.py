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
from services.gateway.auth.outage import Outage
from services.gateway.auth.ratelimit import RateDecision, RateLimiter, refill

log = logging.getLogger(__name__)

ATTEMPTS = 6
_UNSAFE = re.compile(r"[^A-Za-z0-9_=-]")


TRY_TIMEOUT_S = 0.5
"""A take slower than this is taken as the bucket out of reach (the process's own bucket
answers instead: a limiter must not hold a request up)."""


class SharedRateLimiter:
    def __init__(self, kv: KeyValue, clock: Callable[[], float] = time.time) -> None:
        self._kv = kv
        self._clock = clock
        self._local = RateLimiter(clock=clock)
        self._outage = Outage()
        self._queues: dict[str, tuple[asyncio.Lock, int]] = {}
        """Per key: the lock its takes queue on here, and how many hold or wait for it."""

    @classmethod
    async def open(cls, bus: Bus) -> SharedRateLimiter:
        await bus.js.key_value(RATELIMITS_BUCKET)  # it exists (declared by ensure_streams)
        # Read through the stream's leader, not any replica: a compare-and-set on a revision
        # read from a lagging follower (one catching up after a partition) loses every time.
        kv = KeyValue(
            name=RATELIMITS_BUCKET,
            stream=f"KV_{RATELIMITS_BUCKET}",
            pre=f"$KV.{RATELIMITS_BUCKET}.",
            js=bus.js,
            direct=False,
        )
        return cls(kv)

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
        if self._outage.ongoing:
            return self._local.take(key, limit)
        lost_to: set[int] = set()
        try:
            for _ in range(ATTEMPTS):
                decided, read = await asyncio.wait_for(self._try(name, limit), TRY_TIMEOUT_S)
                if decided is not None:
                    return decided
                lost_to.add(read)
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError, ValueError) as exc:
            log.warning("shared rate limit unavailable (%r): limiting in this process", exc)
            self._outage.seen()
            return self._local.take(key, limit)
        if len(lost_to) == 1:
            # Every try lost against the one revision it read: nobody else took from the
            # bucket, a write of ours is stuck in flight (a leader cut off from its quorum
            # with a proposal it cannot commit refuses every later compare-and-set).
            log.warning("shared rate limit stuck at revision %s: limiting in this process",
                        lost_to.pop())  # fmt: skip
            self._outage.seen()
            return self._local.take(key, limit)
        # Lost every race: so many requests on one key at once is the flood a limit is for.
        return RateDecision(allowed=False, limit=limit, remaining=0, reset_s=60, retry_after_s=1)

    async def _try(self, name: str, limit: int) -> tuple[RateDecision | None, int]:
        """The decision if stored, else None and the revision the lost write was based on."""
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
            # Another replica took from this bucket first: read it again.
            return None, entry.revision if entry is not None and entry.revision else 0
        return decision, 0
