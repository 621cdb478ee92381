"""Scheduler entry point (``jetyard serve scheduler``): connect, run until ``stop`` is set.

Reads ``ev.session.*``, ``ev.node.*``, ``ev.agent.*`` and ``cmd.session.*``; writes
``ev.session.<id>``, ``ev.node.<id>`` and ``out.<command id>`` (see ``service.py``). Serves
``/metrics`` on ``JETYARD_SCHEDULER_METRICS_PORT`` when set.
"""

from __future__ import annotations

import asyncio

from events.bus import connect, ensure_streams
from httpserver.metrics import metrics_listener
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
            host, port = scheduler_settings.metrics_host, scheduler_settings.metrics_port
            async with metrics_listener(scheduler.metrics, host, port, "scheduler"):
                await stop.wait()
        finally:
            await scheduler.stop()
    finally:
        await bus.close()
