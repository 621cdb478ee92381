"""Serving controller entry point (``jetyard serve serving``): connect, run until ``stop`` is set.

Reads ``ev.endpoint.*``, ``ev.session.*``, ``ev.agent.*``, ``ev.activity.*``,
``cmd.endpoint.*`` and the app proxies' load reports (``jy.serving.load.*``); writes
``ev.endpoint.*``, ``out.<command id>``, ``cmd.session.*`` and the ``serving`` lease (see
``service.py``). Serves ``/metrics`` on ``JETYARD_SERVING_METRICS_PORT`` when set: its fold's
and command consumer's lag, the events it appended (docs/metrics.md).
"""

from __future__ import annotations

import asyncio

from events.bus import connect, ensure_streams
from events.metrics import lag_metrics
from httpserver.metrics import metrics_listener
from schemas.settings import NatsSettings
from services.serving.service import ServingService
from services.serving.settings import ServingSettings


async def run(settings: ServingSettings, nats: NatsSettings, stop: asyncio.Event) -> None:
    bus = await connect(nats, name="serving")
    try:
        await ensure_streams(bus)
        service = ServingService(bus, settings)
        await service.start()
        try:
            metrics = lag_metrics(service.fold, bus, [service.runner.durable])
            async with metrics_listener(
                metrics, settings.metrics_host, settings.metrics_port, "serving"
            ):
                await stop.wait()
        finally:
            await service.stop()
    finally:
        await bus.close()
