"""An in-process gateway on the real log: projections on SQLite, a tenancy service under its
own durable consumer (removed afterwards), the credential stores, uvicorn on a free port, and
the superadmin ``jetyard up`` would create."""

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
from nats.js.errors import NotFoundError

from events.bus import Bus
from jetyard.runtime.bootstrap import AdminCredentials, bootstrap
from jetyard.runtime.natsserver import free_port
from jetyard.sdk import JetyardAuth
from projections.db import create_engine
from projections.runner import Projector
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM
from schemas.tenancy import SessionOwner, project_id_for
from services.gateway.app import open_services
from services.gateway.context import Services
from services.gateway.core.views import SqlViews
from services.gateway.http import build_app
from services.gateway.settings import GatewaySettings
from services.tenancy.service import TenancyService
from services.tenancy.settings import TenancySettings


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
    config = {"command_timeout_s": 2.0, "rate_limit": 100_000, **settings}
    gateway_settings = GatewaySettings(secrets_key=key.decode(), **config)
    async with contextlib.AsyncExitStack() as stack:
        # Each part is undone as soon as it exists, so a failed start leaves nothing behind.
        engine = create_engine(f"sqlite+aiosqlite:///{data_dir / 'views.db'}")
        stack.push_async_callback(engine.dispose)
        projector = Projector(engine, bus)
        await projector.start()
        stack.push_async_callback(projector.close)
        stop = asyncio.Event()
        projecting = asyncio.create_task(projector.run(stop, timeout=0.2))
        stack.push_async_callback(_stopped, stop, projecting)
        durable = f"tenancy-test-{new_id()[:8]}"
        stack.push_async_callback(_delete_consumer, bus, durable)
        tenancy = TenancyService(bus, TenancySettings(durable=durable, poll_timeout_s=0.2))
        stack.push_async_callback(tenancy.stop)
        await tenancy.start()
        services = await stack.enter_async_context(
            open_services(bus, gateway_settings, SqlViews(engine))
        )
        admin = await bootstrap(bus, data_dir, key)
        assert admin is not None
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(build_app(services), port=port, lifespan="off", log_level="warning")
        )
        serving = asyncio.create_task(server.serve())
        stack.push_async_callback(_shut, server, serving)
        while not server.started:  # noqa: ASYNC110 (uvicorn exposes no start event)
            await asyncio.sleep(0.02)
        client = await stack.enter_async_context(httpx.AsyncClient(timeout=20))
        yield Gateway(f"http://127.0.0.1:{port}", client, services, admin)


async def _stopped(stop: asyncio.Event, task: asyncio.Task[None]) -> None:
    stop.set()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _shut(server: uvicorn.Server, serving: asyncio.Task[None]) -> None:
    server.should_exit = True
    await serving


async def _delete_consumer(bus: Bus, durable: str) -> None:
    with contextlib.suppress(NotFoundError):
        await bus.js.delete_consumer(COMMANDS_STREAM, durable)


async def gql_ok(gw: Gateway, query: str, **variables: Any) -> dict[str, Any]:
    """The answer's data, asserting there were no errors."""
    body = await gw.gql(query, **variables)
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def person(
    gw: Gateway, name: str, domain: str, project: str, role: str = "user"
) -> tuple[SessionOwner, JetyardAuth, str]:
    """A user of ``role`` in ``domain``'s ``project`` with a keypair: as a session owner, the
    keypair's signing, and the email."""
    email = f"{name}-{new_id()[:6]}@example.org"
    made = await gql_ok(
        gw,
        """mutation($e: String!, $d: String!, $r: String!, $p: [ID!]) {
            createUser(email: $e, password: "pw-123456", domain: $d, role: $r, projects: $p) {
            id } }""",
        e=email, d=domain, r=role, p=[project_id_for(domain, project)],
    )  # fmt: skip
    user_id = made["createUser"]["id"]
    issued = await gql_ok(
        gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }", u=user_id
    )
    ak, sk = issued["createKeypair"]["accessKey"], issued["createKeypair"]["secretKey"]
    owner = SessionOwner(
        access_key=ak, user_id=user_id, project_id=project_id_for(domain, project), domain=domain
    )
    return owner, JetyardAuth(ak, sk), email
