"""Leases in the ``jy-leases`` bucket: one holder at a time per key, for work that must have a
single active doer (e.g. admitting one domain's sessions). Reads and writes ``jy-leases``.

An entry names its holder and when it expires; the bucket has no TTL, so expiry is read from
the value. Every change is a compare-and-set on the key's revision, so two contenders can never
both take a free or expired lease. A lease is a liveness aid, not a fence: writers still guard
their writes with the event store's optimistic concurrency.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable

import nats.errors
from nats.js.errors import (
    KeyDeletedError,
    KeyNotFoundError,
    KeyValueError,
    KeyWrongLastSequenceError,
)
from nats.js.kv import KeyValue

from events.bus import Bus
from schemas.subjects import LEASES_BUCKET


class Lease:
    def __init__(
        self,
        bus: Bus,
        key: str,
        holder: str,
        ttl_s: float,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._bus = bus
        self.key = key
        self.holder = holder
        self.ttl_s = ttl_s
        self._clock = clock
        self._kv: KeyValue | None = None
        self._revision: int | None = None
        self._expires_at = 0.0

    @property
    def held(self) -> bool:
        """We hold it as far as we know: taken or renewed, and not yet expired."""
        return self._revision is not None and self._clock() < self._expires_at

    @property
    def remaining_s(self) -> float:
        return max(0.0, self._expires_at - self._clock()) if self._revision is not None else 0.0

    async def acquire(self) -> bool:
        """Take the lease if it is free, expired or already ours; True when held after."""
        kv = await self._bucket()
        if self._revision is not None and await self.renew():
            return True
        expires = self._clock() + self.ttl_s
        value = self._value(expires)
        try:
            return self._took(await kv.create(self.key, value), expires)
        except KeyWrongLastSequenceError:
            pass
        try:
            entry = await kv.get(self.key)
        except (KeyNotFoundError, KeyDeletedError):
            return False  # released in between: the next attempt creates it
        holder, until = _parse(entry.value)
        if holder != self.holder and until > self._clock():
            self._revision = None
            return False
        try:
            return self._took(await kv.update(self.key, value, last=entry.revision), expires)
        except KeyWrongLastSequenceError:
            self._revision = None
            return False

    async def renew(self) -> bool:
        """Extend a lease we hold; False (and no longer held) if someone took it meanwhile."""
        if self._revision is None:
            return await self.acquire()
        kv = await self._bucket()
        expires = self._clock() + self.ttl_s
        try:
            revision = await kv.update(self.key, self._value(expires), last=self._revision)
        except KeyWrongLastSequenceError:
            self._revision = None
            return False
        return self._took(revision, expires)

    async def release(self) -> None:
        """Give it back now, so another holder need not wait for it to expire."""
        if self._revision is None:
            return
        kv = await self._bucket()
        with contextlib.suppress(KeyValueError, nats.errors.Error):
            await kv.delete(self.key, last=self._revision)
        self._revision = None

    def _took(self, revision: int, expires: float) -> bool:
        self._revision, self._expires_at = revision, expires
        return True

    def _value(self, expires: float) -> bytes:
        return json.dumps({"holder": self.holder, "expires_at": expires}).encode()

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(LEASES_BUCKET)
        return self._kv


def _parse(value: bytes | None) -> tuple[str, float]:
    # An unreadable entry (or a delete marker) counts as expired: it protects nothing.
    try:
        data = json.loads(value or b"{}")
        return str(data["holder"]), float(data["expires_at"])
    except (ValueError, KeyError, TypeError):
        return "", 0.0
