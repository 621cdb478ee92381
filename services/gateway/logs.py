"""Kernel logs as kept by the agents in the ``jy-logs`` object store (named by kernel id)."""

from __future__ import annotations

import nats.js.errors

from events.bus import Bus
from schemas.subjects import LOGS_BUCKET


async def read_logs(bus: Bus, kernel_id: str) -> str | None:
    try:
        store = await bus.js.object_store(LOGS_BUCKET)
        result = await store.get(kernel_id)
    except (
        nats.js.errors.NotFoundError,
        nats.js.errors.BucketNotFoundError,
        nats.js.errors.ObjectNotFoundError,
    ):
        return None
    if result.data is None:
        return None
    return result.data.decode(errors="replace")
