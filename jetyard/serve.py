"""``jetyard serve <service>``: run one service in this process until SIGINT or SIGTERM.

Each service exposes ``run(settings..., stop)``; configuration comes from ``JETYARD_*``
environment variables (pydantic-settings), built once here and passed down.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable

from schemas.settings import NatsSettings

log = logging.getLogger("jetyard.serve")

SHUTDOWN_GRACE_S = 15.0

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


def _tenancy(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.tenancy.app")
    settings = importlib.import_module("services.tenancy.settings")
    return app.run(settings.TenancySettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


SERVICES: dict[str, Callable[[asyncio.Event], Awaitable[None]]] = {
    "scheduler": _scheduler,
    "agent": _agent,
    "projections": _projections,
    "tenancy": _tenancy,
    "gateway": _gateway,
}


async def _serve(name: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    log.info("%s starting", name)
    running = asyncio.ensure_future(SERVICES[name](stop))
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not running.done():
        # A clean stop may need NATS (a last write, a drain). If NATS is gone too (its
        # parent was killed), that wait would never end: bound it, then leave anyway.
        done, _ = await asyncio.wait({running}, timeout=SHUTDOWN_GRACE_S)
        if not done:
            log.error("%s did not stop within %ss; exiting", name, SHUTDOWN_GRACE_S)
            os._exit(1)
    stopping.cancel()
    running.result()
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
