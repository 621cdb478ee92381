"""Kernel logs: as kept by the agents in the ``jy-logs`` object store (named by kernel id) once
a kernel ends, and before that its live output so far from ``JY_OUTPUT``
(``output_feed``)."""

from __future__ import annotations

import nats.js.errors

from events.bus import Bus
from schemas.subjects import LOGS_BUCKET
from services.gateway.sessions.output_feed import output_so_far


async def kernel_logs(bus: Bus, session_id: str, kernel_id: str) -> str | None:
    """The archived output of an ended kernel; a running one's output so far; None if neither
    exists (not started yet, or nothing printed)."""
    archived = await read_logs(bus, kernel_id)
    return archived if archived is not None else await output_so_far(bus, session_id, kernel_id)


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
