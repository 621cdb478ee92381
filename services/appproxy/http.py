"""The app proxy's listener (path mode): ``/apps/<session id>/<app>/<path>`` forwards HTTP and
WebSocket traffic to the app's reported address, with ``/apps/<session id>/<app>`` stripped
(``X-Forwarded-Prefix`` says it). Routes come from ``service.AppProxyService``'s fold, the
rules of who may pass from ``access.py``. Every running session's ``terminal`` goes to its main
kernel's agent with a fresh terminal token. No writes; no subjects of its own.

Unknown route: 404; a session that ended: 410; an app that does not answer: 502.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import httpx
import uvicorn
import websockets
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import HTTPConnection, Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection, connect

from schemas import terminal_tokens
from schemas.app_tokens import COOKIE
from services.appproxy import access
from services.appproxy.routes import Route as AppRoute
from services.appproxy.service import AppProxyService

log = logging.getLogger(__name__)

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "trailers", "transfer-encoding", "upgrade", "host",
})  # fmt: skip
WS_HANDSHAKE = frozenset({
    "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions",
    "sec-websocket-protocol", "content-length",
})  # fmt: skip
WHOLE_BODY_BYTES = 64 * 1024
"""An answer that says it is no longer is read whole before it is passed on; longer or
unsized ones are streamed."""
ENDED_CLOSE = 1001
"""The close code a WebSocket gets when its session ends (going away)."""


def _headers(
    conn: HTTPConnection, route: AppRoute, drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    named = {v.strip().lower() for v in conn.headers.get("connection", "").split(",")}
    out = []
    for name, value in conn.headers.items():
        lower = name.lower()
        if lower in HOP_BY_HOP or lower in named or lower in drop:
            continue
        if lower == "cookie":
            value = access.strip_cookie(value)
            if not value:
                continue
        out.append((name, value))
    client = conn.client.host if conn.client else ""
    out += [
        ("X-Forwarded-For", client),
        ("X-Forwarded-Host", conn.headers.get("host", "")),
        ("X-Forwarded-Proto", conn.url.scheme.replace("ws", "http")),
        ("X-Forwarded-Prefix", access.prefix(route.session_id, route.app)),
    ]
    return out


def _target(conn: HTTPConnection, route: AppRoute, scheme: str) -> str:
    raw = conn.scope.get("raw_path") or conn.url.path.encode()
    path = raw.decode("latin-1").removeprefix(access.prefix(route.session_id, route.app)) or "/"
    query = access.without_token(conn.url.query)
    return f"{scheme}://{route.upstream}{path}" + (f"?{query}" if query else "")


def _terminal_target(conn: HTTPConnection, route: AppRoute) -> str:
    """The main kernel's terminal at its agent, with the size asked (nothing else passes)."""
    size = {k: conn.query_params[k] for k in ("cols", "rows") if k in conn.query_params}
    query = urlencode(size)
    return f"{route.upstream}/kernels/{route.kernel_id}/pty" + (f"?{query}" if query else "")


def _route_of(conn: HTTPConnection) -> AppRoute | Response:
    service: AppProxyService = conn.app.state.service
    session_id, app = conn.path_params["session"], conn.path_params["app"]
    route = service.table.route(session_id, app)
    if route is not None:
        return route
    if session_id in service.table.ended:
        return PlainTextResponse(f"session {session_id} has ended", status_code=410)
    return PlainTextResponse(f"no app {app!r} in a running session {session_id}", 404)


def _check(conn: HTTPConnection, route: AppRoute) -> access.Allowed:
    settings = conn.app.state.service.settings
    return access.check(
        route, settings.token_key.get_secret_value().encode(),
        token=access.token_of(conn.url.query), cookie=conn.cookies.get(COOKIE),
        now=time.time(), max_url_ttl_s=settings.max_url_token_ttl_s,
        cookie_ttl_s=settings.cookie_ttl_s,
    )  # fmt: skip


async def to_slash(request: Request) -> Response:
    """``/apps/<s>/<a>`` → ``/apps/<s>/<a>/``: the cookie's path ends with a slash."""
    query = request.url.query
    return RedirectResponse(request.url.path + "/" + (f"?{query}" if query else ""), 308)


async def forward(request: Request) -> Response:
    route = _route_of(request)
    if isinstance(route, Response):
        return route
    try:
        allowed = _check(request, route)
    except access.Refused as refused:
        return PlainTextResponse(refused.message, status_code=refused.status)
    if allowed.cookie is not None:
        settings = request.app.state.service.settings
        query = access.without_token(request.url.query)
        answer = RedirectResponse(request.url.path + (f"?{query}" if query else ""), 303)
        answer.headers["set-cookie"] = access.set_cookie_header(
            route, allowed.cookie, max_age_s=settings.cookie_ttl_s,
            secure=settings.public_url.startswith("https:"),
        )  # fmt: skip
        return answer
    if route.app == terminal_tokens.TERMINAL:
        return PlainTextResponse("the terminal is a WebSocket (jetyard shell)", 400)
    client: httpx.AsyncClient = request.app.state.client
    framed = "content-length" in request.headers or "transfer-encoding" in request.headers
    upstream = client.build_request(
        request.method, _target(request, route, "http"),
        headers=_headers(request, route), content=request.stream() if framed else None,
    )  # fmt: skip
    try:
        response = await client.send(upstream, stream=True)
    except httpx.HTTPError as exc:
        log.info("appproxy: %s/%s did not answer: %r", route.session_id, route.app, exc)
        return PlainTextResponse(f"the app {route.app} does not answer", status_code=502)
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in HOP_BY_HOP]
    proxied: Response
    if _small(response):
        # Read whole and sent in one piece: no streaming task per request for what most
        # requests get (pages, API answers, small files). Raw bytes, never decoded.
        try:
            body = b"".join([chunk async for chunk in response.aiter_raw()])
        except httpx.HTTPError as exc:
            log.info("appproxy: %s/%s broke off: %r", route.session_id, route.app, exc)
            return PlainTextResponse(f"the app {route.app} broke off", status_code=502)
        finally:
            await response.aclose()
        proxied = Response(body, status_code=response.status_code)
    else:
        proxied = StreamingResponse(
            response.aiter_raw(), status_code=response.status_code,
            background=BackgroundTask(response.aclose),
        )  # fmt: skip
    proxied.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    return proxied


def _small(response: httpx.Response) -> bool:
    length = response.headers.get("content-length", "")
    return length.isdigit() and int(length) <= WHOLE_BODY_BYTES


async def forward_ws(websocket: WebSocket) -> None:
    route = _route_of(websocket)
    if isinstance(route, Response):
        await _deny(websocket, route)
        return
    try:
        _check(websocket, route)
    except access.Refused as refused:
        await _deny(websocket, PlainTextResponse(refused.message, refused.status))
        return
    service: AppProxyService = websocket.app.state.service
    target, headers = _target(websocket, route, "ws"), _headers(websocket, route, WS_HANDSHAKE)
    if route.app == terminal_tokens.TERMINAL:
        terminal_key = service.settings.terminal_key
        if terminal_key is None:
            message = "this proxy has no terminal key (JETYARD_APPPROXY_TERMINAL_KEY)"
            await _deny(websocket, PlainTextResponse(message, 503))
            return
        target = _terminal_target(websocket, route)
        token = terminal_tokens.issue(
            terminal_key.get_secret_value().encode(), route.kernel_id, now=time.time()
        )
        # Only the proxy's own grant reaches the agent, never one a client sent.
        header = terminal_tokens.HEADER
        headers = [(k, v) for k, v in headers if k.lower() != header.lower()]
        headers.append((header, token))
    try:
        upstream = await connect(
            target,
            additional_headers=headers,
            subprotocols=websocket.scope.get("subprotocols") or None,
            open_timeout=service.settings.connect_timeout_s, max_size=None,
        )  # fmt: skip
    except (OSError, TimeoutError, websockets.exceptions.WebSocketException) as exc:
        log.info("appproxy: %s/%s refused a WebSocket: %r", route.session_id, route.app, exc)
        await _deny(websocket, PlainTextResponse("the app does not answer", 502))
        return
    async with upstream:
        await websocket.accept(subprotocol=upstream.subprotocol)
        with service.connections.opened(route.session_id) as ended:
            await _bridge(websocket, upstream, ended)


async def _bridge(websocket: WebSocket, upstream: ClientConnection, ended: asyncio.Event) -> None:
    async def inbound() -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                await upstream.send(text if text is not None else message.get("bytes") or b"")

    async def outbound() -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            async for message in upstream:
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
    with contextlib.suppress(RuntimeError, OSError):  # the client may have gone already
        await websocket.close(code=code, reason=reason)


async def _deny(websocket: WebSocket, response: Response) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:
        await websocket.close(code=4000 + response.status_code)


async def healthz(request: Request) -> JSONResponse:
    service: AppProxyService = request.app.state.service
    return JSONResponse({"status": "ok", "routes": len(service.table.routes())})


APP = "/apps/{session}/{app}"
ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route(APP, to_slash, methods=METHODS),
    Route(APP + "/{path:path}", forward, methods=METHODS),
    WebSocketRoute(APP + "/{path:path}", forward_ws),
]


def create_app(service: AppProxyService) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        timeout = httpx.Timeout(None, connect=service.settings.connect_timeout_s)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client:
            app.state.client = client
            yield

    app = Starlette(routes=ROUTES, lifespan=lifespan)
    app.state.service = service
    return app


def server(service: AppProxyService) -> uvicorn.Server:
    settings = service.settings
    # httpx logs every request at INFO: a line per proxied request costs CPU and fills the log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = uvicorn.Config(
        create_app(service), host=settings.host, port=settings.port, lifespan="on",
        access_log=False, log_level="info", timeout_graceful_shutdown=5,
        ws="websockets-sansio",
    )  # fmt: skip
    return uvicorn.Server(config)
