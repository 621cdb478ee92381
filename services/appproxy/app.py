"""App proxy entry point (``jetyard serve appproxy``): fold the routes from the log and serve
them on ``JETYARD_APPPROXY_HOST``:``PORT`` in one process and one event loop, until ``stop``
is set.

Reads ``ev.session.*`` and ``ev.agent.*``; writes ``ev.activity.<proxy id>`` (see ``service.py``).
"""

from __future__ import annotations

import asyncio

from events.bus import connect, ensure_streams
from httpserver.server import serve_until
from schemas.settings import NatsSettings
from services.appproxy import http
from services.appproxy.service import AppProxyService
from services.appproxy.settings import AppProxySettings


async def run(settings: AppProxySettings, nats: NatsSettings, stop: asyncio.Event) -> None:
    bus = await connect(nats, name="appproxy")
    try:
        await ensure_streams(bus)
        service = AppProxyService(bus, settings)
        await service.start()
        try:
            await serve_until(http.server(service), stop, "the app proxy")
        finally:
            await service.stop()
    finally:
        await bus.close()
