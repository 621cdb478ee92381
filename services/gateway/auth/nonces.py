"""Replay guard for signed requests: every (access key, nonce) is claimed once in ``jy-nonces``.

The bucket's TTL (twice the signature window plus a minute) outlives every date the gateway
would still accept, so a nonce is remembered exactly as long as a replay could pass the date
check, and the bucket's size stays bounded by the request rate.
"""

from __future__ import annotations

import nats.js.errors
from nats.js.kv import KeyValue

from events.bus import Bus
from schemas.signing import check_nonce
from schemas.subjects import NONCES_BUCKET


class NonceStore:
    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._kv: KeyValue | None = None

    async def claim(self, access_key: str, nonce: str) -> bool:
        """True the first time; False when this nonce was already used with this key."""
        if self._kv is None:
            self._kv = await self._bus.js.key_value(NONCES_BUCKET)
        # A create is atomic on the server: of two gateways receiving the same request at
        # once, exactly one wins.
        try:
            await self._kv.create(f"{access_key}.{check_nonce(nonce)}", b"")
        except nats.js.errors.KeyWrongLastSequenceError:
            return False
        return True
