"""For the app proxy's tests: a fake app (HTTP that says what it got, a WebSocket echo) on a
free port, a running proxy, and the events that make a session's app a route, written as the
scheduler and an agent would."""

from __future__ import annotations

import contextlib
import random
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from events.bus import Bus
from events.catalogue import Event
from events.domain.agent import KernelServicePortsReported
from events.domain.session import SessionRequested, SessionStarted
from events.store import EventStore
from events.writes import AggregateRef, Write
from httpserver.server import listening
from schemas.app_tokens import AppClaims, issue, new_grant
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.appproxy import http
from services.appproxy.service import AppProxyService
from services.appproxy.settings import AppProxySettings
from tests.support import envelope

KEY = "k" * 48
ALICE, BOB = "user-alice", "user-bob"


async def _echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({
        "method": request.method, "path": request.url.path, "query": request.url.query,
        "cookie": request.headers.get("cookie"), "body": body.decode(),
        "prefix": request.headers.get("x-forwarded-prefix"),
    })  # fmt: skip


async def _ws_echo(websocket: WebSocket) -> None:
    await websocket.accept()
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            await websocket.send_text("echo:" + await websocket.receive_text())


FAKE_APP = Starlette(
    routes=[
        Route("/{path:path}", _echo, methods=["GET", "POST", "PUT", "DELETE"]),
        WebSocketRoute("/ws", _ws_echo),
    ]
)


def _port(server: uvicorn.Server) -> int:
    return int(server.servers[0].sockets[0].getsockname()[1])


@contextlib.asynccontextmanager
async def serving(server: uvicorn.Server) -> AsyncIterator[int]:
    async with listening(server, "a test's server"):
        yield _port(server)


@contextlib.asynccontextmanager
async def fake_app() -> AsyncIterator[int]:
    config = uvicorn.Config(FAKE_APP, host="127.0.0.1", port=0, log_level="warning",
                            ws="websockets-sansio", lifespan="off")  # fmt: skip
    async with serving(uvicorn.Server(config)) as port:
        yield port


@contextlib.asynccontextmanager
async def running_proxy(
    bus: Bus, terminal_key: str | None = None, app_ports: range | None = None
) -> AsyncIterator[tuple[AppProxyService, str]]:
    """A proxy with its own fold, and its base URL (port mode on ``app_ports`` if given)."""
    settings = AppProxySettings(
        port=0, token_key=KEY, poll_timeout_s=0.2, terminal_key=terminal_key,
        app_ports=f"{app_ports.start}-{app_ports.stop - 1}" if app_ports else None,
    )  # fmt: skip
    service = AppProxyService(bus, settings)
    await service.start()
    try:
        async with serving(http.server(service)) as port:
            yield service, f"http://127.0.0.1:{port}"
    finally:
        await service.stop()


def free_ports(count: int) -> range:
    """``count`` consecutive ports free on 127.0.0.1 now."""
    for _ in range(200):
        first = random.randrange(20_000, 60_000 - count)
        socks: list[socket.socket] = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return range(first, first + count)
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def token(session_id: str, app: str, user: str, *, admin: bool = False, ttl: int = 60) -> str:
    import time

    claims = AppClaims(session=session_id, app=app, user=user, admin=admin,
                       grant=new_grant(), iat=time.time(), exp=int(time.time()) + ttl)  # fmt: skip
    return issue(KEY.encode(), claims)


@dataclass
class FakeSession:
    """A session the test writes the events of."""

    store: EventStore
    id: str = field(default_factory=new_id)
    kernel: str = field(default_factory=new_id)
    version: int = 0
    guard: int = 0

    async def write(self, *events: Event) -> None:
        ref = AggregateRef(AggregateType.SESSION, self.id)
        envs = []
        for e in events:
            self.version += 1
            payload = e.model_dump(mode="json")
            envs.append(envelope(ref, self.version, name=e.event_name, payload=payload))
        committed = await self.store.append(Write(ref, self.guard, tuple(envs)))
        self.guard = committed.seqs[-1]

    async def start(self, owner: str, ports: list[tuple[str, int, bool]]) -> None:
        """Requested by ``owner``, running, its apps (name, port on 127.0.0.1, public) open."""
        spec = SessionSpec(image="fake:1", kernels=(KernelSpec(resources=ResourceSlots.of(
            cpu="0.5", memory=64 << 20)),))  # fmt: skip
        who = SessionOwner(access_key="AK", user_id=owner, project_id="p", domain="default")
        await self.write(
            SessionRequested(spec=spec, kernel_ids=(self.kernel,), owner=who),
            SessionStarted(reason="started"),
        )
        reported = tuple(
            ReportedPort(name=name, protocol=PortProtocol.HTTP, port=port,
                         address=f"127.0.0.1:{port}", state=PortState.OPEN, public=public)
            for name, port, public in ports
        )  # fmt: skip
        report = KernelServicePortsReported(
            kernel_id=self.kernel, session_id=self.id, ports=reported
        )
        node = AggregateRef(AggregateType.AGENT, new_id())
        env = envelope(node, 1, name=report.event_name, payload=report.model_dump(mode="json"))
        await self.store.append(Write.create(node, env))
