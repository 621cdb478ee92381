"""Tenancy service entry point (``jetyard serve tenancy``): connect, run until ``stop`` is set.

Reads the tenancy subjects and ``cmd.<tenancy aggregate>.*``; writes the tenancy subjects and
``out.<command id>`` (see ``service.py``). Serves ``/metrics`` on
``JETYARD_TENANCY_METRICS_PORT`` when set: its fold's and command consumer's lag, the events
it appended (docs/metrics.md).
"""

from __future__ import annotations

import asyncio

from events.bus import connect, ensure_streams
from events.metrics import lag_metrics
from httpserver.metrics import metrics_listener
from schemas.settings import NatsSettings
from services.tenancy.service import TenancyService
from services.tenancy.settings import TenancySettings


async def run(settings: TenancySettings, nats: NatsSettings, stop: asyncio.Event) -> None:
    bus = await connect(nats, name="tenancy")
    try:
        await ensure_streams(bus)
        service = TenancyService(bus, settings)
        await service.start()
        try:
            metrics = lag_metrics(service.fold, bus, [service.runner.durable])
            async with metrics_listener(
                metrics, settings.metrics_host, settings.metrics_port, "tenancy"
            ):
                await stop.wait()
        finally:
            await service.stop()
    finally:
        await bus.close()
