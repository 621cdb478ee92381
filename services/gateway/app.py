"""Gateway entry point: connect, open the views, serve GraphQL on uvicorn until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import uvicorn

from commands.bus import CommandBus
from events.bus import connect, ensure_streams
from projections.settings import ProjectionSettings
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.settings import NatsSettings
from services.gateway.http import build_app
from services.gateway.schema import Context
from services.gateway.settings import GatewaySettings
from services.gateway.sqlviews import SqlViews

log = logging.getLogger(__name__)

# Until tenancy lands, every request acts as this user of the default domain.
ANONYMOUS = Actor(kind=ActorKind.USER, id="anonymous")


async def run(settings: GatewaySettings, nats: NatsSettings, stop: asyncio.Event) -> None:
    bus = await connect(nats, name="gateway")
    await ensure_streams(bus)
    views = await SqlViews.open(ProjectionSettings(), bus)
    context = Context(
        views=views,
        commands=CommandBus(bus),
        bus=bus,
        settings=settings,
        actor=ANONYMOUS,
        tenant=SYSTEM_TENANT,
    )
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(context),
            host=settings.host,
            port=settings.port,
            lifespan="off",
            log_level="warning",
            ws="websockets",
        )
    )
    serving = asyncio.create_task(server.serve())
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        server.should_exit = True
        stopping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        await views.close()
        await bus.close()
