"""Sealer entry point (``jetyard serve sealer``): connect, seal the log until ``stop`` is set.

Reads ``JY_EVENTS`` (every subject, raw) and the newest seal; writes ``seal.log`` on
``JY_SEALS``. Serves ``/metrics`` on ``JETYARD_SEALER_METRICS_PORT`` when set: the last
sealed position, the events not sealed yet, the seals written and lost to another sealer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from events.audit.log_io import stream_end
from events.audit.seals import load_signing_key
from events.bus import connect, ensure_streams
from events.metrics import Metrics
from httpserver.metrics import metrics_listener
from schemas.settings import NatsSettings
from services.sealer.metrics import SealerCollector
from services.sealer.service import Sealer
from services.sealer.settings import SealerSettings


async def run(settings: SealerSettings, nats: NatsSettings, stop: asyncio.Event) -> None:
    key = load_signing_key(settings.key_file)  # before connecting: a bad key is said at once
    if settings.nice:
        os.nice(settings.nice)  # behind the services that schedule: a seal may come late
    bus = await connect(nats, name="sealer")
    try:
        await ensure_streams(bus)
        sealer = Sealer(bus, settings, key)
        await sealer.resume()
        metrics = Metrics()
        collector = SealerCollector(sealer)
        metrics.add(collector)

        async def read_end() -> None:
            collector.log_end = await stream_end(bus)

        metrics.before_scrape(read_end)
        work = asyncio.create_task(sealer.run(stop), name="sealer")
        stopping = asyncio.create_task(stop.wait(), name="sealer:stop")
        try:
            async with metrics_listener(
                metrics, settings.metrics_host, settings.metrics_port, "sealer"
            ):
                await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if work.done():
                    work.result()  # a sealer that cannot go on (a forged seal) ends the process
        finally:
            for task in (work, stopping):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await sealer.close()
    finally:
        await bus.close()
