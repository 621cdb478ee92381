"""Kernel logs kept after the kernel ends: the ``jy-logs`` object store, one object per kernel
(named by kernel id). Writes objects in ``jy-logs`` (the agent); reads them (anyone)."""

from __future__ import annotations

import nats.js.errors
from nats.js import api
from nats.js.object_store import ObjectStore

from events.bus import Bus
from schemas.subjects import LOGS_BUCKET


class LogArchive:
    """Where an agent puts a kernel's output before removing its container."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    @classmethod
    async def open(cls, bus: Bus) -> LogArchive:
        """The bucket, created if missing (ensure_streams does not declare it: only agents
        write it). Logs are kept until an operator deletes them."""
        try:
            store = await bus.js.object_store(LOGS_BUCKET)
        except nats.js.errors.BucketNotFoundError:
            store = await bus.js.create_object_store(
                LOGS_BUCKET,
                api.ObjectStoreConfig(
                    description="Jetyard kernel logs, one object per kernel id",
                    storage=api.StorageType.FILE,
                    replicas=bus.settings.replicas,
                ),
            )
        return cls(store)

    async def save(self, kernel_id: str, text: str) -> None:
        # Putting the same name again replaces the object: keeping logs twice is harmless.
        await self._store.put(kernel_id, text.encode())


async def read_kernel_logs(bus: Bus, kernel_id: str) -> str | None:
    """A finished kernel's stdout and stderr; None if none were kept (still running, unknown)."""
    try:
        store = await bus.js.object_store(LOGS_BUCKET)
        result = await store.get(kernel_id)
    except nats.js.errors.NotFoundError:  # no bucket, no object, or a deleted one
        return None
    if result.data is None:
        return None
    return result.data.decode(errors="replace")
