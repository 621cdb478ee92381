"""An in-process gateway on the real log: projections on SQLite, the admin module, the
credential stores, uvicorn on a free port, and the superadmin ``jetyard up`` would create."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from cryptography.fernet import Fernet

from events.bus import Bus
from jetyard.bootstrap import AdminCredentials, bootstrap
from jetyard.natsserver import free_port
from jetyard.sdk import JetyardAuth
from projections.db import create_engine
from projections.runner import Projector
from services.gateway.app import open_services
from services.gateway.context import Services
from services.gateway.http import build_app
from services.gateway.settings import GatewaySettings
from services.gateway.sqlviews import SqlViews


@dataclass
class Gateway:
    url: str
    client: httpx.AsyncClient
    services: Services
    admin: AdminCredentials

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://")

    def auth_of(self, access_key: str, secret_key: str) -> JetyardAuth:
        return JetyardAuth(access_key, secret_key)

    @property
    def root(self) -> JetyardAuth:
        return JetyardAuth(self.admin.access_key, self.admin.secret_key)

    async def gql(
        self, query: str, *, auth: httpx.Auth | None = None, **variables: Any
    ) -> dict[str, Any]:
        """As the superadmin unless ``auth`` says otherwise."""
        response = await self.client.post(
            f"{self.url}/graphql",
            json={"query": query, "variables": variables},
            auth=auth or self.root,
        )
        body: dict[str, Any] = response.json()
        return body


@contextlib.asynccontextmanager
async def running_gateway(bus: Bus, data_dir: Path, **settings: Any) -> AsyncIterator[Gateway]:
    key = Fernet.generate_key()
    engine = create_engine(f"sqlite+aiosqlite:///{data_dir / 'views.db'}")
    projector = Projector(engine, bus)
    await projector.start()
    stop = asyncio.Event()
    projecting = asyncio.create_task(projector.run(stop, timeout=0.2))
    config = {"command_timeout_s": 2.0, "rate_limit": 100_000, **settings}
    gateway_settings = GatewaySettings(secrets_key=key.decode(), **config)
    services, admin_module, quotas = await open_services(bus, gateway_settings, SqlViews(engine))
    admin = await bootstrap(bus, data_dir, key)
    assert admin is not None
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build_app(services), port=port, lifespan="off", log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn exposes no start event)
        await asyncio.sleep(0.02)
    try:
        async with httpx.AsyncClient(timeout=20) as client:
            yield Gateway(f"http://127.0.0.1:{port}", client, services, admin)
    finally:
        server.should_exit = True
        await serving
        await admin_module.stop()
        await quotas.stop()
        await services.queues.close()
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await projecting
        await projector.close()
        await engine.dispose()
