"""Which agents are alive: a watch on the ``jy-heartbeats`` bucket (keys ``agent.<node id>``).
A key that expires (the bucket's TTL, with limit markers so the expiry is heard) or is deleted
means the agent stopped answering; the scheduler then declares its node lost. Reads the
bucket; writes nothing.

The watch first delivers the keys present now (then a ``None`` marker), then changes: no
polling of every key. Nodes registered but without a key when the watch started are reported
once a TTL has passed (an agent that registered just before beats within an interval).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from events.bus import Bus
from events.kv_watch import watch_keys
from schemas.subjects import HEARTBEATS_BUCKET

log = logging.getLogger(__name__)

PREFIX = "agent."


class HeartbeatWatch:
    def __init__(
        self, bus: Bus, on_gone: Callable[[str], None], *, ttl_s: float, retry_after_s: float = 1.0
    ) -> None:
        self._bus = bus
        self._on_gone = on_gone
        self.ttl_s = ttl_s
        self._retry_after_s = retry_after_s
        self.present: set[str] = set()
        """Agents whose heartbeat key exists."""
        self.listed = asyncio.Event()
        """Set once the keys present at the start are known."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="scheduler:heartbeats")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def sweep(self, known: Callable[[], Iterable[str]], after_s: float | None = None) -> None:
        """Once a TTL has passed since the start: every ``known()`` node without a key is gone
        (its agent died while no scheduler watched)."""
        await asyncio.sleep(self.ttl_s if after_s is None else after_s)
        await self.listed.wait()
        for agent_id in known():
            if agent_id not in self.present:
                self._on_gone(agent_id)

    async def _watch(self) -> None:
        await watch_keys(
            self._bus, HEARTBEATS_BUCKET, f"{PREFIX}*",
            lambda key, _, operation: self._update(key, operation),
            listed=self.listed, retry_after_s=self._retry_after_s, what="heartbeats",
        )  # fmt: skip

    def _update(self, key: str, operation: str | None) -> None:
        if not key.startswith(PREFIX):
            return
        agent_id = key[len(PREFIX) :]
        if operation is None:  # a refresh
            self.present.add(agent_id)
            return
        # DEL, or the PURGE marker the server writes when the key's TTL ran out.
        self.present.discard(agent_id)
        log.warning("agent %s: heartbeat gone (%s)", agent_id, operation)
        self._on_gone(agent_id)
