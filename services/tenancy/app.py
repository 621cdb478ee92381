"""Tenancy service entry point (``jetyard serve tenancy``): connect, run until ``stop`` is set.

Reads the tenancy subjects and ``cmd.<tenancy aggregate>.*``; writes the tenancy subjects and
``out.<command id>`` (see ``service.py``).
"""

from __future__ import annotations

import asyncio

from events.bus import connect, ensure_streams
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
            await stop.wait()
        finally:
            await service.stop()
    finally:
        await bus.close()
