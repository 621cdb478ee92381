"""``jetyard serve <service>``: run one service in this process until SIGINT or SIGTERM.

Each service exposes ``run(settings..., stop)``; configuration comes from ``JETYARD_*``
environment variables (pydantic-settings), built once here and passed down.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from collections.abc import Awaitable, Callable

from schemas.settings import NatsSettings

log = logging.getLogger("jetyard.serve")

Runner = Callable[[asyncio.Event], Awaitable[None]]


def _scheduler(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.scheduler.app")
    settings = importlib.import_module("services.scheduler.settings")
    return app.run(settings.SchedulerSettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


def _agent(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.node.app")
    settings = importlib.import_module("services.node.settings")
    return app.run(settings.AgentSettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


def _projections(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("projections.app")
    settings = importlib.import_module("projections.settings")
    return app.run(settings.ProjectionSettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


def _gateway(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.gateway.app")
    settings = importlib.import_module("services.gateway.settings")
    return app.run(settings.GatewaySettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


SERVICES: dict[str, Callable[[asyncio.Event], Awaitable[None]]] = {
    "scheduler": _scheduler,
    "agent": _agent,
    "projections": _projections,
    "gateway": _gateway,
}


async def _serve(name: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    log.info("%s starting", name)
    await SERVICES[name](stop)
    log.info("%s stopped", name)


def serve(name: str) -> int:
    if name not in SERVICES:
        raise ValueError(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(message)s")
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover (uvloop is a dependency on Linux)
        pass
    asyncio.run(_serve(name))
    return 0
