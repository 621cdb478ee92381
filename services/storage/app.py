"""Storage service entry point (``jetyard serve storage``): the control part and the data
plane in one process and one event loop, run until ``stop`` is set.

Reads the tenancy subjects, ``ev.vfolder.*``, ``ev.session.*`` and ``cmd.vfolder.*``; writes
``ev.vfolder.*`` and ``out.<command id>`` (see ``control/service.py``); serves the data plane
on ``JETYARD_STORAGE_HOST``:``PORT`` (see ``dataplane.py``), with ``/metrics`` there: its
HTTP requests, its fold's and command consumer's lag, the events it appended (docs/metrics.md).
"""

from __future__ import annotations

import asyncio

from events.bus import connect, ensure_streams
from events.metrics import lag_metrics
from httpserver.server import serve_until
from schemas.settings import NatsSettings
from services.storage import dataplane
from services.storage.control.service import StorageService
from services.storage.settings import StorageSettings


async def run(settings: StorageSettings, nats: NatsSettings, stop: asyncio.Event) -> None:
    bus = await connect(nats, name="storage")
    try:
        await ensure_streams(bus)
        service = StorageService(bus, settings)
        await service.start()
        try:
            metrics = lag_metrics(service.fold, bus, [service.runner.durable])
            server = dataplane.server(settings, service.volumes, service.hooks(), metrics)
            await serve_until(server, stop, "the storage data plane")
        finally:
            await service.stop()
    finally:
        await bus.close()
