"""Replay guard for signed requests: every (access key, nonce) is claimed once in ``jy-nonces``.

The bucket's TTL (twice the signature window plus a minute) outlives every date the gateway
would still accept, so a nonce is remembered exactly as long as a replay could pass the date
check, and the bucket's size stays bounded by the request rate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import nats.js.errors
from nats.js.kv import KeyValue

from events.bus import Bus, is_unavailable
from schemas.signing import check_nonce
from schemas.subjects import NONCES_BUCKET
from services.gateway.auth.outage import Outage

CLAIM_TIMEOUT_S = 1.0
"""A claim slower than this is taken as the bucket out of reach."""


class NonceStore:
    def __init__(self, bus: Bus, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._bus = bus
        self._kv: KeyValue | None = None
        self._clock = clock
        # As long as the bucket keeps a nonce: a replay older than that fails the date check.
        self._window_s = 2 * bus.settings.signature_window_s + 60
        self._outage = Outage(clock=clock)
        self._local: dict[str, float] = {}
        """Nonces claimed here while the bucket was out of reach (key -> when), oldest first."""

    async def claim(self, access_key: str, nonce: str) -> bool:
        """True the first time; False when this nonce was already used with this key."""
        # A create is atomic on the server: of two gateways receiving the same request at
        # once, exactly one wins.
        key = f"{access_key}.{check_nonce(nonce)}"
        if self._outage.ongoing:
            return self._claim_locally(key)
        try:
            await asyncio.wait_for(self._create(key), CLAIM_TIMEOUT_S)
        except nats.js.errors.KeyWrongLastSequenceError:
            return False
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            self._outage.seen()
            # The bucket cannot take the claim (no quorum here, or no leader for a moment):
            # claimed in this gateway's memory instead, so a replay to this gateway is still
            # refused. One to another gateway of the same minority side could pass while
            # the outage lasts; commands are refused then anyway (the log takes no writes),
            # so what could be replayed is a read (docs/multi-machine.md).
            return self._claim_locally(key)
        return True

    async def _create(self, key: str) -> None:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(NONCES_BUCKET)
        await self._kv.create(key, b"")

    def _claim_locally(self, key: str) -> bool:
        now = self._clock()
        while self._local and next(iter(self._local.values())) < now - self._window_s:
            self._local.pop(next(iter(self._local)))
        if key in self._local:
            return False
        self._local[key] = now
        return True
