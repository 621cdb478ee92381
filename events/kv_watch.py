"""Following the keys of a KV bucket for the life of a task: the keys present when the watch
starts (then ``listed`` is set), then every change, each handed to ``changed(key, value,
operation)`` (``operation`` None for a put; ``DEL`` or ``PURGE`` — the marker the server writes
when a key's TTL ran out — for a removal). A watch that fails (the connection lost, the
server restarted) is made again after ``retry_after_s``, and the keys present then are
delivered again; it ends only when its task is cancelled. Reads the bucket; writes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import nats.errors
import nats.js.errors

from events.bus import Bus
from events.cancelling import cancelling

log = logging.getLogger(__name__)

Changed = Callable[[str, bytes | None, str | None], None]


async def watch_keys(
    bus: Bus,
    bucket: str,
    keys: str,
    changed: Changed,
    *,
    listed: asyncio.Event,
    retry_after_s: float,
    what: str,
) -> None:
    """Follow ``keys`` (a subject pattern within ``bucket``) until cancelled."""
    while not cancelling():
        try:
            kv = await bus.js.key_value(bucket)
            watcher = await kv.watch(keys, include_history=False)
            try:
                async for entry in watcher:
                    if entry is None:  # the keys present at the start are all in
                        listed.set()
                        continue
                    changed(entry.key, entry.value, entry.operation)
            finally:
                with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
                    await watcher.stop()  # type: ignore[no-untyped-call]
        except (nats.errors.Error, nats.js.errors.Error, TimeoutError) as exc:
            if cancelling():
                raise asyncio.CancelledError from exc
            log.warning("%s: the watch failed (%r); watching again", what, exc)
            await asyncio.sleep(retry_after_s)
