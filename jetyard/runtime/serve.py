"""``jetyard serve <service>``: run one service in this process until SIGINT or SIGTERM.

Each service exposes ``run(settings..., stop)``; configuration comes from ``JETYARD_*``
environment variables (pydantic-settings), built once here and passed down. Every service
asks about ``stop`` only once it has started (connected, caught up with the log, registered,
serving): that first question is its readiness, logged ("<service> ready") and, when
``JETYARD_READY_FILE`` names a file, written there (its pid) for ``jetyard up``; the file is
removed when the service ends. From then on its heap is kept out of the cyclic garbage
collector's walks (``jetyard.runtime.heap``).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

from jetyard.runtime.data_dir import mark_ready
from jetyard.runtime.heap import freeze_after_collecting, keep_frozen, tune_collector
from schemas.settings import NatsSettings

log = logging.getLogger("jetyard.serve")

SHUTDOWN_GRACE_S = 15.0
STOPPED_FOR_GOOD = 78
"""A service's exit status when a restart could change nothing (its node was removed, a volume
it is configured with cannot be used): sysexits' ``EX_CONFIG``. Not 3: uvicorn exits 3 when
its server cannot start (a port in use), which a restart may well change."""
READY_FILE_ENV = "JETYARD_READY_FILE"


class StopSignal(asyncio.Event):
    """The ``stop`` a service runs until. The service's first look at it (``wait`` or
    ``is_set``) calls ``ready``: no service looks before it has started."""

    def __init__(self, ready: Callable[[], None]) -> None:
        super().__init__()
        self._ready: Callable[[], None] | None = ready

    def _looked(self) -> None:
        if self._ready is not None:
            ready, self._ready = self._ready, None
            ready()

    async def wait(self) -> Literal[True]:
        self._looked()
        return await super().wait()

    def is_set(self) -> bool:
        self._looked()
        return super().is_set()


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


def _storage(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.storage.app")
    settings = importlib.import_module("services.storage.settings")
    return app.run(settings.StorageSettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


def _appproxy(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.appproxy.app")
    settings = importlib.import_module("services.appproxy.settings")
    return app.run(settings.AppProxySettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


def _serving(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.serving.app")
    settings = importlib.import_module("services.serving.settings")
    return app.run(settings.ServingSettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


def _sealer(stop: asyncio.Event) -> Awaitable[None]:
    app = importlib.import_module("services.sealer.app")
    settings = importlib.import_module("services.sealer.settings")
    return app.run(settings.SealerSettings(), NatsSettings(), stop)  # type: ignore[no-any-return]


SERVICES: dict[str, Callable[[asyncio.Event], Awaitable[None]]] = {
    "scheduler": _scheduler,
    "agent": _agent,
    "projections": _projections,
    "tenancy": _tenancy,
    "storage": _storage,
    "appproxy": _appproxy,
    "serving": _serving,
    "sealer": _sealer,
    "gateway": _gateway,
}


async def _serve(name: str, ready_file: Path | None) -> None:
    freezing: list[asyncio.Task[None]] = []

    def ready() -> None:
        # Started: what it holds from now on stays out of the collector's walks
        # (jetyard.runtime.heap).
        freeze_after_collecting()
        freezing.append(asyncio.ensure_future(keep_frozen()))
        log.info("%s ready", name)
        if ready_file is not None:
            mark_ready(ready_file)

    # `signalled` is serve's own copy of the signal: waiting on `stop` here would be a look.
    stop, signalled = StopSignal(ready), asyncio.Event()

    def stop_on_signal() -> None:
        stop.set()
        signalled.set()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop_on_signal)
    log.info("%s starting", name)
    running = asyncio.ensure_future(SERVICES[name](stop))
    stopping = asyncio.ensure_future(signalled.wait())
    await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not running.done():
        # A clean stop may need NATS (a last write, a drain). If NATS is gone too (its
        # parent was killed), that wait would never end: bound it, then leave anyway.
        done, _ = await asyncio.wait({running}, timeout=SHUTDOWN_GRACE_S)
        if not done:
            log.error("%s did not stop within %ss; exiting", name, SHUTDOWN_GRACE_S)
            os._exit(1)
    stopping.cancel()
    for task in freezing:
        task.cancel()
    running.result()
    log.info("%s stopped", name)


def serve(name: str) -> int:
    if name not in SERVICES:
        raise ValueError(f"unknown service {name!r}; choose one of {', '.join(SERVICES)}")
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {name} %(levelname)s %(message)s")
    tune_collector()
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover (uvloop is a dependency on Linux)
        pass
    named = os.environ.get(READY_FILE_ENV)
    ready_file = Path(named) if named else None
    try:
        asyncio.run(_serve(name, ready_file))
    except Exception as exc:
        if not getattr(exc, "for_good", False):
            raise
        # Nothing a restart could change (a removed node, an unusable volume): said once, and a
        # status that tells a supervisor not to start it again.
        log.error("%s stopped for good: %s", name, exc)
        return STOPPED_FOR_GOOD
    finally:
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
    return 0
