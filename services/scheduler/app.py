"""Scheduler entry point (``jetyard serve scheduler``): connect, run until ``stop`` is set.

Reads ``ev.session.*``, ``ev.node.*``, ``ev.agent.*`` and ``cmd.session.*``; writes
``ev.session.<id>``, ``ev.node.<id>`` and ``out.<command id>`` (see ``service.py``).
"""

from __future__ import annotations

import asyncio

from events.bus import connect, ensure_streams
from schemas.settings import NatsSettings
from services.scheduler.service import Scheduler
from services.scheduler.settings import SchedulerSettings


async def run(
    scheduler_settings: SchedulerSettings, nats_settings: NatsSettings, stop: asyncio.Event
) -> None:
    bus = await connect(nats_settings, name="scheduler")
    try:
        await ensure_streams(bus)
        scheduler = Scheduler(bus, scheduler_settings)
        await scheduler.start()
        try:
            await stop.wait()
        finally:
            await scheduler.stop()
    finally:
        await bus.close()
