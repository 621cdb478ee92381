"""``jetyard serve projections``: keep the views equal to the log until stopped.

Reads ``ev.>``. A view stored by another view version is rebuilt (shadow tables, then a swap)
before the projector follows the log. Serves ``/metrics`` on ``JETYARD_PROJECTIONS_METRICS_PORT``
when set (``projections.metrics``).
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import connect
from httpserver.metrics import metrics_listener
from projections.base import read_positions
from projections.db import create_engine
from projections.metrics import projection_metrics
from projections.rebuild import rebuild_on
from projections.runner import Projector, create_tables
from projections.settings import ProjectionSettings
from projections.views import VIEWS
from schemas.settings import NatsSettings

log = logging.getLogger(__name__)


async def outdated_views(engine: AsyncEngine) -> list[str]:
    """Views whose stored version is not this code's."""
    async with engine.connect() as conn:
        stored = await read_positions(conn, [v.name for v in VIEWS])
    return [v.name for v in VIEWS if v.name in stored and stored[v.name].version != v.version]


async def run(
    settings: ProjectionSettings, nats_settings: NatsSettings, stop: asyncio.Event
) -> None:
    bus = await connect(nats_settings, name="jetyard-projections")
    engine = create_engine(settings.database_url)
    projector = Projector(engine, bus, batch=settings.batch)
    try:
        await create_tables(engine, [])
        outdated = await outdated_views(engine)
        if outdated:
            log.warning("views %s were built by another version; rebuilding", outdated)
            await rebuild_on(engine, bus, batch=settings.batch)
        position = await projector.start()
        log.info("projecting from seq %d into %s", position + 1, engine.url.render_as_string())
        metrics = projection_metrics(projector, bus)
        host, port = settings.metrics_host, settings.metrics_port
        async with metrics_listener(metrics, host, port, "projections"):
            await projector.run(stop, settings.fetch_timeout_s)
    finally:
        await projector.close()
        await engine.dispose()
        await bus.close()
