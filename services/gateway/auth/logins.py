"""Login tokens for people using a browser: ``jy-logins`` holds each live token under the
SHA-256 of the token (a read of the bucket yields no usable token) with its user and expiry.

The bucket's TTL is the login lifetime, so the expiry written here is the precise check and
the TTL only clears what nobody revoked.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import nats.js.errors
from nats.js.kv import KeyValue

from events.bus import Bus
from schemas.subjects import LOGINS_BUCKET


def _now() -> datetime:
    return datetime.now(UTC)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class LoginStore:
    def __init__(self, bus: Bus, ttl_s: float, clock: Callable[[], datetime] = _now) -> None:
        self._bus = bus
        self._ttl = timedelta(seconds=ttl_s)
        self._clock = clock
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(LOGINS_BUCKET)
        return self._kv

    async def issue(self, user_id: str) -> str:
        token = secrets.token_urlsafe(32)
        expires = self._clock() + self._ttl
        record = {"user_id": user_id, "expires_at": expires.isoformat()}
        await (await self._bucket()).put(_digest(token), json.dumps(record).encode())
        return token

    async def resolve(self, token: str) -> str | None:
        """The user this token logged in, or None when unknown, revoked or expired."""
        try:
            entry = await (await self._bucket()).get(_digest(token))
        except nats.js.errors.KeyNotFoundError:
            return None
        if not entry.value:
            return None
        record = json.loads(entry.value)
        if datetime.fromisoformat(record["expires_at"]) <= self._clock():
            return None
        return str(record["user_id"])

    async def revoke(self, token: str) -> None:
        await (await self._bucket()).purge(_digest(token))
