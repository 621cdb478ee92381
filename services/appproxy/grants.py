"""The proxy's shared memory of grants, in the ``jy-app-grants`` bucket (``schemas/app_tokens``):
a URL token is claimed there the first time it is used, atomically, so that of two replicas
(or one before and after a restart) only one ever lets it through; and the revocations owners
write (``revokeAppAccess``) are followed, so that every replica refuses the cookies they void
within a moment. Reads and writes that bucket only.

Fails closed: when the bucket cannot be reached, a URL is refused (503), never let through
unclaimed. Cookies need no I/O: revocations are read from the watch's local copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import nats.errors
import nats.js.errors
from nats.js.kv import KeyValue

from events.bus import Bus
from events.kv_watch import watch_keys
from schemas.app_tokens import REVOKED_PREFIX, claimed_key, revocation_of
from schemas.subjects import GRANTS_BUCKET

log = logging.getLogger(__name__)


class GrantsUnavailable(Exception):
    """The bucket could not be reached to claim a URL token."""


class Grants:
    def __init__(self, bus: Bus, retry_after_s: float = 1.0) -> None:
        self._bus = bus
        self._retry_after_s = retry_after_s
        self._kv: KeyValue | None = None
        self._revoked: dict[tuple[str, str | None], float] = {}
        self.listed = asyncio.Event()
        """Set once the revocations present at the start are known."""
        self._task: asyncio.Task[None] | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(GRANTS_BUCKET)
        return self._kv

    async def claim(self, grant: str) -> bool:
        """True the first time ``grant``'s URL is used anywhere; False ever after."""
        try:
            kv = await self._bucket()
            await kv.create(claimed_key(grant), b"")
        except nats.js.errors.KeyWrongLastSequenceError:
            return False
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
            raise GrantsUnavailable(f"cannot check the app URL now ({exc!r})") from exc
        return True

    def revoked_at(self, session_id: str, app: str) -> float | None:
        """The latest revocation of this app of the session (or of all its apps), if any."""
        one = self._revoked.get((session_id, app))
        every = self._revoked.get((session_id, None))
        if one is None:
            return every
        return one if every is None else max(one, every)

    async def start(self, timeout_s: float) -> None:
        """Follow revocations; return once those present now are read (or ``timeout_s``)."""
        self._task = asyncio.create_task(self._watch(), name="appproxy:grants")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.listed.wait(), timeout_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        await watch_keys(
            self._bus, GRANTS_BUCKET, f"{REVOKED_PREFIX}>", self._update,
            listed=self.listed, retry_after_s=self._retry_after_s, what="appproxy revocations",
        )  # fmt: skip

    def _update(self, key: str, value: bytes | None, operation: str | None) -> None:
        target = revocation_of(key)
        if target is None:
            return
        if operation is not None or not value:  # deleted, or expired with its last cookie
            self._revoked.pop(target, None)
            return
        try:
            at = float(value)
        except ValueError:
            log.warning("appproxy: revocation %s holds %r, not a time; ignored", key, value)
            return
        self._revoked[target] = max(at, self._revoked.get(target, at))
