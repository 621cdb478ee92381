"""Login tokens for people using a browser: ``jy-logins`` holds each live token under the
SHA-256 of the token (a read of the bucket yields no usable token) with its user and expiry.

The bucket's TTL is the login lifetime, so the expiry written here is the precise check and
the TTL only clears what nobody revoked.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import nats.js.errors
from nats.js.kv import KeyValue

from events.bus import Bus, is_unavailable
from schemas.subjects import LOGINS_BUCKET
from services.gateway.auth.outage import Outage

LOOKUP_TIMEOUT_S = 1.0
"""A lookup slower than this is taken as the bucket out of reach (a leader cut off from its
quorum answers nothing until it steps down)."""
SEEN_LOGINS = 10_000


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
        self._outage = Outage()
        self._seen: dict[str, tuple[str, datetime]] = {}
        """Logins resolved here (digest -> user, expiry), newest last: the answer while the
        bucket is out of reach."""

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
        """The user this token logged in, or None when unknown, revoked or expired.

        While the bucket cannot be read (the log has no quorum here, or no leader for a
        moment) a login this gateway resolved before is taken as it was, until its own
        expiry: a revocation cannot be stored then either, so nothing newer could be known.
        Reads through a login keep working on the minority side of a partition."""
        digest = _digest(token)
        if self._outage.ongoing and digest in self._seen:
            return self._seen_user(digest)
        try:
            entry = await asyncio.wait_for((await self._bucket()).get(digest), LOOKUP_TIMEOUT_S)
        except nats.js.errors.KeyNotFoundError:
            self._seen.pop(digest, None)
            return None
        except Exception as exc:
            if not is_unavailable(exc):
                raise
            self._outage.seen()
            if digest not in self._seen:
                raise
            return self._seen_user(digest)
        if not entry.value:
            return None
        record = json.loads(entry.value)
        expires = datetime.fromisoformat(record["expires_at"])
        if expires <= self._clock():
            return None
        self._remember(digest, str(record["user_id"]), expires)
        return str(record["user_id"])

    def _seen_user(self, digest: str) -> str | None:
        user_id, expires = self._seen[digest]
        return user_id if expires > self._clock() else None

    def _remember(self, digest: str, user_id: str, expires: datetime) -> None:
        self._seen.pop(digest, None)
        self._seen[digest] = (user_id, expires)
        while len(self._seen) > SEEN_LOGINS:
            self._seen.pop(next(iter(self._seen)))

    async def revoke(self, token: str) -> None:
        self._seen.pop(_digest(token), None)
        await (await self._bucket()).purge(_digest(token))
