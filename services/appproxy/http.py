"""The app proxy's listener (path mode): ``/apps/<session id>/<app>/<path>`` forwards HTTP and
WebSocket traffic to the app's reported address, with ``/apps/<session id>/<app>`` stripped
(``X-Forwarded-Prefix`` says it; what else of a request reaches the app: ``headers.py``), and
``/e/<endpoint name>/<path>`` plain HTTP to a model-serving endpoint's replicas
(``endpoints/forward.py``).
Routes come from ``service.AppProxyService``'s fold, the rules of who may pass from
``access.py``. Every running session's ``terminal`` goes to its main kernel's agent with a
fresh terminal token. No writes; no subjects of its own.

Unknown route: 404; a session that ended: 410; an app that does not answer: 502. ``/metrics``
serves the proxy's traffic counters (``metrics.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlencode

import uvicorn
import websockets
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection, connect

from httpserver.server import bound_socket
from schemas import terminal_tokens
from services.appproxy import access, headers
from services.appproxy.endpoints.forward import EndpointForwarder, endpoint_name
from services.appproxy.forward import Forwarder, Mount, Resolved, app_path
from services.appproxy.metrics import WS_ACCEPTED, EndpointMetrics, ProxyMetrics
from services.appproxy.pool import Pool
from services.appproxy.relay import Relay
from services.appproxy.routes import Route as AppRoute
from services.appproxy.service import AppProxyService

log = logging.getLogger(__name__)

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
WS_HANDSHAKE = frozenset({
    b"sec-websocket-key", b"sec-websocket-version", b"sec-websocket-extensions",
    b"sec-websocket-protocol", b"content-length",
})  # fmt: skip
"""The client's own handshake: the proxy makes its own with the app."""
ENDED_CLOSE = 1001
"""The close code a WebSocket gets when its session ends (going away)."""


def _headers(conn: HTTPConnection, mount: Mount) -> list[tuple[str, str]]:
    passed = headers.to_app(conn.scope, mount.prefix, WS_HANDSHAKE)
    return [(name.decode("latin-1"), value.decode("latin-1")) for name, value in passed]


def _target(conn: HTTPConnection, route: AppRoute, mount: Mount) -> str:
    return f"ws://{route.upstream}" + headers.target(conn.scope, mount.prefix).decode("latin-1")


def _terminal_target(conn: HTTPConnection, route: AppRoute) -> str:
    """The main kernel's terminal at its agent, with the size asked and whether with a TTY
    (nothing else passes: not the client's URL token)."""
    asked = {k: conn.query_params[k] for k in ("cols", "rows", "tty") if k in conn.query_params}
    query = urlencode(asked)
    return f"{route.upstream}/kernels/{route.kernel_id}/pty" + (f"?{query}" if query else "")


async def to_slash(request: Request) -> Response:
    """``/apps/<s>/<a>`` → ``/apps/<s>/<a>/``: the cookie's path ends with a slash."""
    query = request.url.query
    return RedirectResponse(request.url.path + "/" + (f"?{query}" if query else ""), 308)


async def forward_ws(websocket: WebSocket) -> None:
    """Path mode's WebSocket route."""
    forwarder: Forwarder = websocket.app.state.forwarder
    found = forwarder.at_path(websocket.path_params["session"], websocket.path_params["app"])
    await bridge_ws(websocket, forwarder, found)


async def bridge_ws(websocket: WebSocket, forwarder: Forwarder, found: Resolved) -> None:
    """A WebSocket to the app resolved (``found``), once its owner's grant is checked."""
    counted = forwarder.counted
    if isinstance(found[0], int):
        await _deny(websocket, PlainTextResponse(str(found[1]), found[0]), counted)
        return
    route, mount = found
    assert isinstance(route, AppRoute) and isinstance(mount, Mount)
    try:
        await forwarder.admit(route, mount, websocket.scope, access.token_of(websocket.url.query))
    except access.Refused as refused:
        await _deny(websocket, PlainTextResponse(refused.message, refused.status), counted)
        return
    service = forwarder.service
    target, sent = _target(websocket, route, mount), _headers(websocket, mount)
    if route.app == terminal_tokens.TERMINAL:
        terminal_key = service.settings.terminal_key
        if terminal_key is None:
            message = "this proxy has no terminal key (JETYARD_APPPROXY_TERMINAL_KEY)"
            await _deny(websocket, PlainTextResponse(message, 503), counted)
            return
        target = _terminal_target(websocket, route)
        token = terminal_tokens.issue(
            terminal_key.get_secret_value().encode(), route.kernel_id, now=time.time()
        )
        # Only the proxy's own grant reaches the agent, never one a client sent.
        header = terminal_tokens.HEADER
        sent = [(k, v) for k, v in sent if k.lower() != header.lower()]
        sent.append((header, token))
    try:
        upstream = await connect(
            target,
            additional_headers=sent,
            subprotocols=websocket.scope.get("subprotocols") or None,
            open_timeout=service.settings.connect_timeout_s, max_size=None,
        )  # fmt: skip
    except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
        log.info("appproxy: %s/%s refused a WebSocket: %r", route.session_id, route.app, exc)
        await _deny(websocket, PlainTextResponse("the app does not answer", 502), counted)
        return
    route_key = (route.session_id, route.app)
    async with upstream:
        await websocket.accept(subprotocol=upstream.subprotocol)
        counted.websocket_status(WS_ACCEPTED)
        with service.connections.opened(route.session_id) as ended:
            await _bridge(websocket, upstream, ended, lambda: service.traffic(*route_key), counted)


async def _bridge(
    websocket: WebSocket, upstream: ClientConnection, ended: asyncio.Event,
    traffic: Callable[[], None], counted: ProxyMetrics,
) -> None:  # fmt: skip
    async def inbound() -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                traffic()
                text = message.get("text")
                payload = text if text is not None else message.get("bytes") or b""
                counted.messages_to_app.inc()
                counted.from_client.inc(len(payload))
                await upstream.send(payload)

    async def outbound() -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            async for message in upstream:
                traffic()
                counted.messages_to_client.inc()
                counted.to_client.inc(len(message))
                if isinstance(message, str):
                    await websocket.send_text(message)
                else:
                    await websocket.send_bytes(message)

    tasks = {
        asyncio.create_task(inbound()),
        asyncio.create_task(outbound()),
        asyncio.create_task(ended.wait()),
    }
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    code, reason = (
        (ENDED_CLOSE, "the session ended") if ended.is_set() else (upstream.close_code or 1000, "")
    )
    await upstream.close()
    with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):  # the client went
        await websocket.close(code=code, reason=reason)


async def _deny(websocket: WebSocket, response: Response, counted: ProxyMetrics) -> None:
    counted.websocket_status(response.status_code)
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=4000 + response.status_code)


async def healthz(request: Request) -> JSONResponse:
    service: AppProxyService = request.app.state.service
    table = service.table
    return JSONResponse({"status": "ok", "routes": len(table.routes()),
                         "endpoints": len(table.endpoints.by_id)})  # fmt: skip


APP = "/apps/{session}/{app}"


async def metrics(request: Request) -> Response:
    forwarder: Forwarder = request.app.state.forwarder
    return Response(await forwarder.metrics.render(), media_type=CONTENT_TYPE_PLAIN_0_0_4)


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route(APP, to_slash, methods=METHODS),
    WebSocketRoute(APP + "/{path:path}", forward_ws),
]


class ProxyApp:
    """The listener's ASGI app: plain HTTP to an app goes straight to ``forward.Forwarder``,
    to an endpoint to ``endpoints.forward.EndpointForwarder`` (the hot paths, no framework in
    between, one pool of upstream connections); everything else to the Starlette app."""

    def __init__(self, service: AppProxyService) -> None:
        relay = Relay(Pool(connect_timeout_s=service.settings.connect_timeout_s))
        self.forwarder = Forwarder(service, relay)
        self.endpoints = EndpointForwarder(
            service, relay, self.forwarder.counted,
            EndpointMetrics(self.forwarder.metrics, service),
        )  # fmt: skip

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            try:
                yield
            finally:
                relay.pool.close()

        self.starlette = Starlette(routes=ROUTES, lifespan=lifespan)
        self.starlette.state.service = service
        self.starlette.state.forwarder = self.forwarder

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ports, kind = self.forwarder.ports, scope["type"]
        if ports is not None and kind in ("http", "websocket"):
            server = scope.get("server")
            if server is not None and server[1] in ports:  # port mode: the port is the app
                found = self.forwarder.at_port(server[1])
                if kind == "http":
                    await self.forwarder(scope, receive, send, found)
                else:
                    await bridge_ws(WebSocket(scope, receive, send), self.forwarder, found)
                return
        if kind == "http":
            target = app_path(scope["path"])
            if target is not None:
                await self.forwarder(scope, receive, send, self.forwarder.at_path(*target))
                return
            name = endpoint_name(scope["path"])
            if name is not None:
                await self.endpoints(scope, receive, send, name)
                return
        await self.starlette(scope, receive, send)


class ProxyServer(uvicorn.Server):
    """uvicorn listening on the main port and, in port mode, on every port of the range."""

    def __init__(self, config: uvicorn.Config, app_ports: range | None) -> None:
        super().__init__(config)
        self.app_ports = app_ports

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None and self.app_ports is not None:
            sockets = [self.config.bind_socket()]
            try:
                sockets += [_app_port(self.config.host, port) for port in self.app_ports]
            except BaseException:
                for sock in sockets:
                    sock.close()
                raise
        await super().serve(sockets)


def _app_port(host: str, port: int) -> socket.socket:
    try:
        return bound_socket(host, port)
    except OSError as exc:
        raise OSError(f"port {port} of JETYARD_APPPROXY_APP_PORTS: {exc.strerror}") from exc


def server(service: AppProxyService) -> uvicorn.Server:
    settings = service.settings
    config = uvicorn.Config(
        ProxyApp(service), host=settings.host, port=settings.port, lifespan="on",
        access_log=False, log_level="info", timeout_graceful_shutdown=5,
        ws="websockets-sansio",
        # The proxy is the edge: a client's X-Forwarded-For is not who it is.
        proxy_headers=False,
    )  # fmt: skip
    return ProxyServer(config, settings.app_port_range())
