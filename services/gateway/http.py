"""The gateway's HTTP app: GraphQL (queries, mutations, graphql-transport-ws subscriptions) at
``/graphql``, ``/healthz`` (200 only when the views have caught up) and ``/asyncapi.json`` (the
AsyncAPI document of every command, outcome and event subject, built from the code at start),
and the web console at ``/console/`` (``services.gateway.console``: static pages, public);
``/metrics`` for Prometheus (``services.gateway.metrics``, docs/metrics.md).

Every HTTP request is authenticated before GraphQL sees it (a keypair signature or a login
token; none at all reaches only ``login``), rate limited per keypair or user, and recorded in
the access log with its outcome. WebSockets authenticate in ``connection_init``.

Without credentials only ``login`` (and the GraphiQL page, a GET with no query) is answered:
introspection and ``/asyncapi.json`` need a signed-in caller like every other operation. A
body that is not a GraphQL request is a 400 saying why (``services.gateway.requests``); NATS
unreachable is a 503 ``unavailable`` at once; no input makes a 500.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from commands.asyncapi import build_document
from commands.authorisation import Principal
from events.store import EventStore
from schemas.ids import new_id
from services.gateway.access import AccessRecord, now
from services.gateway.auth.authenticate import AuthError, signed_target
from services.gateway.auth.ratelimit import Limiter, LocalLimiter
from services.gateway.console.routes import console_routes
from services.gateway.context import Context, Services
from services.gateway.errors import UNAVAILABLE, UNAVAILABLE_MESSAGE, UNREACHABLE
from services.gateway.graphiql import ASSETS, ASSETS_URL, local_page
from services.gateway.metrics import gateway_metrics
from services.gateway.requests import (
    MAX_BODY_BYTES,
    BadRequestError,
    GraphQLRequest,
    anonymous_allowed,
    parse_body,
)
from services.gateway.schema import schema
from services.gateway.usage_csv import usage_csv_app

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger(__name__)
GRAPHIQL_PAGE = local_page()

PRINCIPAL_KEY = "jetyard.principal"
BEARER_KEY = "jetyard.bearer"


class JetyardGraphQL(GraphQL[Context, None]):
    def __init__(self, services: Services) -> None:
        super().__init__(
            schema,
            graphql_ide="graphiql" if services.settings.graphiql else None,
            subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL],
        )
        self.services = services

    async def render_graphql_ide(self, request: Request) -> Response:
        return HTMLResponse(GRAPHIQL_PAGE)

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket | None = None
    ) -> Context:
        client = request.client
        return Context(
            services=self.services,
            principal=request.scope.get(PRINCIPAL_KEY),
            bearer=request.scope.get(BEARER_KEY),
            source=f"{client.host}:{client.port}" if client else "-",
            over_websocket=isinstance(request, WebSocket),
        )

    async def on_ws_connect(self, context: Context) -> None:
        """``connection_init`` carries the same headers an HTTP request would (a signature
        over ``GET /graphql`` with an empty body, or ``Authorization: Bearer``)."""
        params = context.connection_params or {}
        headers = {str(k).lower(): str(v) for k, v in params.items()}
        services = self.services
        operation = "ws /graphql connection_init"
        try:
            principal = await services.authenticator.authenticate(
                "GET", "/graphql", headers, b"", headers.get("host", "")
            )
        except AuthError as exc:
            await _record(services, None, context.source, operation, f"unauthenticated: {exc.code}")
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from None
        context.principal = principal
        await _record(services, principal, context.source, operation, "ok")


class Authenticated:
    """ASGI middleware in front of GraphQL over HTTP: authenticate, rate limit, log."""

    def __init__(self, app: ASGIApp, services: Services, limiter: Limiter) -> None:
        self.app = app
        self.services = services
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path = signed_target(scope)
        client = scope.get("client")
        source = f"{client[0]}:{client[1]}" if client else "-"
        operation = f"{scope['method']} {scope['path']} {_operation_of(body)}".rstrip()
        services = self.services
        request: GraphQLRequest | None = None
        if scope["method"] == "POST":
            try:
                request = parse_body(body)
            except BadRequestError as exc:
                log.info("refused %s from %s: %s", operation, source, exc)
                await _problem(send, 400, "bad-request", str(exc), {})
                await _record(services, None, source, operation, "refused: bad-request")
                return
        if not services.bus.nc.is_connected:
            # Said at once, not after a request's timeout: nothing here works without NATS.
            await _problem(send, 503, UNAVAILABLE, UNAVAILABLE_MESSAGE, {"retry-after": "5"})
            log.warning("refused %s from %s: NATS is unreachable", operation, source)
            return
        principal: Principal | None = None
        if "authorization" in headers:
            try:
                principal = await services.authenticator.authenticate(
                    scope["method"], path, headers, body, headers.get("host", "")
                )
            except AuthError as exc:
                await _problem(send, 401, exc.code, exc.message, {})
                await _record(services, None, source, operation, f"unauthenticated: {exc.code}")
                return
            except UNREACHABLE as exc:
                log.warning("refused %s from %s: NATS failed (%r)", operation, source, exc)
                await _problem(send, 503, UNAVAILABLE, UNAVAILABLE_MESSAGE, {"retry-after": "5"})
                return
        elif not _anonymous_may(scope, request):
            message = (
                "sign the request with a keypair, or send a login token "
                "(Authorization: Bearer ...): without credentials only `login` is answered"
            )
            await _problem(send, 401, "unauthenticated", message, {})
            await _record(services, None, source, operation, "unauthenticated: missing")
            return
        key = services.rate_key(principal, source)
        verdict = await self.limiter.take(key, services.rate_limit_of(principal))
        limit_headers = {k.lower(): v for k, v in verdict.headers().items()}
        if not verdict.allowed:
            message = (
                f"more than {verdict.limit} requests a minute: try again in {verdict.reset_s}s"
            )
            # Answered first, recorded after (as every request is): the record's round trip
            # to the stream is not the client's wait.
            await _problem(send, 429, "rate-limited", message, limit_headers)
            await _record(services, principal, source, operation, "denied: rate limit")
            return
        scope = dict(scope)
        scope[PRINCIPAL_KEY] = principal
        if principal is not None and headers.get("authorization", "").startswith("Bearer "):
            scope[BEARER_KEY] = headers["authorization"][len("Bearer ") :].strip()
        status: list[int] = []
        sent_body: list[bytes] = []

        async def replay() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
                message = dict(message)
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.encode(), v.encode()) for k, v in limit_headers.items()),
                ]
            elif message["type"] == "http.response.body":
                sent_body.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replay, send_with_limits)
        except Exception as exc:
            if status:
                raise  # the answer has begun: nothing sensible can replace it
            code, message, http = _failure(exc, operation, source)
            await _problem(send, http, code, message, limit_headers)
            status.append(http)
        outcome = _outcome_of(status[0] if status else 500, b"".join(sent_body))
        await _record(services, principal, source, operation, outcome)


def _anonymous_may(scope: Scope, request: GraphQLRequest | None) -> bool:
    """Without credentials: the GraphiQL page (a GET with no query) and ``login``."""
    if scope["path"] != "/graphql":
        return False
    if scope["method"] == "GET":
        return b"query=" not in scope.get("query_string", b"")
    return request is not None and anonymous_allowed(request)


def _failure(exc: Exception, operation: str, source: str) -> tuple[str, str, int]:
    """The answer to a request that failed outside GraphQL's own error handling: NATS gone
    is ``unavailable`` (503); anything else is a bug, logged once with its id."""
    if isinstance(exc, UNREACHABLE):
        log.warning("%s from %s: NATS failed (%r)", operation, source, exc)
        return UNAVAILABLE, UNAVAILABLE_MESSAGE, 503
    incident = new_id()
    log.exception("internal error %s in %s from %s", incident, operation, source)
    return "internal", f"internal error {incident}: it is logged; please report it", 500


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _operation_of(body: bytes) -> str:
    """The GraphQL operation name, or the first field asked for, for the access log."""
    try:
        data = json.loads(body) if body and len(body) <= MAX_BODY_BYTES else {}
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, dict):
        return ""
    name = data.get("operationName")
    if isinstance(name, str) and name:
        return name
    query = data.get("query")
    if not isinstance(query, str):
        return ""
    words = query.replace("{", " { ").replace("(", " ( ").split()
    # "mutation { createSession (" / "{ sessions {" -> the first field after the first brace
    if "{" in words:
        rest = words[words.index("{") + 1 :]
        return rest[0] if rest else ""
    return ""


def _outcome_of(status: int, body: bytes) -> str:
    if status >= 400:
        return f"error: http {status}"
    try:
        errors = json.loads(body).get("errors") if body else None
    except (ValueError, AttributeError):
        errors = None
    if errors:
        codes = sorted({str((e.get("extensions") or {}).get("code", "error")) for e in errors})
        return f"refused: {', '.join(codes)}"
    return "ok"


async def _record(
    services: Services, principal: Principal | None, source: str, operation: str, outcome: str
) -> None:
    await services.access.record(
        AccessRecord(
            at=now(),
            domain=principal.domain if principal else None,
            user_id=principal.user_id if principal else None,
            access_key=principal.access_key if principal else None,
            role=principal.role.value if principal else None,
            source=source,
            operation=operation[:256],
            outcome=outcome[:512],
        )
    )


async def _problem(
    send: Send, status: int, code: str, message: str, headers: dict[str, str]
) -> None:
    body = json.dumps({"errors": [{"message": message, "extensions": {"code": code}}]}).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})


async def health(services: Services, store: EventStore) -> tuple[bool, dict[str, Any]]:
    """Caught up = the views hold every event the log had when we asked. Quarantined events
    make it "degraded": still serving (200), naming them, until an operator acts."""
    try:
        log_end = await store.stream_last_seq()
        views = await services.views.position()
        held = [] if services.quarantine is None else await services.quarantine.recent_entries()
    except Exception as exc:
        return False, {"ok": False, "status": "down", "error": repr(exc)}
    ok = views >= log_end and services.bus.nc.is_connected
    body: dict[str, Any] = {"ok": ok, "log_end": log_end, "views_position": views}
    body["status"] = ("degraded" if held else "ok") if ok else "catching-up"
    if held:
        body["quarantined"] = [
            {"consumer": p.consumer, "seq": p.seq, "subject": p.subject, "error": p.error}
            for p in held[:20]
        ]
        body["quarantined_count"] = len(held)
    return ok, body


def _cached(app: ASGIApp) -> ASGIApp:
    """The vendored GraphiQL files never change under a name: cache them for a year."""

    async def cached(scope: Scope, receive: Receive, send: Send) -> None:
        async def with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [
                    *message.get("headers", []),
                    (b"cache-control", b"public, max-age=31536000, immutable"),
                ]
            await send(message)

        await app(scope, receive, with_header)

    return cached


def build_app(services: Services) -> Starlette:
    graphql = JetyardGraphQL(services)
    store = EventStore(services.bus)
    limiter: Limiter = services.limiter or LocalLimiter()

    # Built once: the document depends only on the code this process runs.
    asyncapi = JSONResponse(build_document())

    async def healthz(_: Request) -> JSONResponse:
        ok, body = await health(services, store)
        return JSONResponse(body, status_code=200 if ok else 503)

    metrics, counted = gateway_metrics(services)  # docs/metrics.md
    return Starlette(
        middleware=[counted],
        routes=[
            Mount(ASSETS_URL, app=_cached(StaticFiles(directory=ASSETS))),
            Route("/graphql", Authenticated(graphql, services, limiter), methods=["GET", "POST"]),
            WebSocketRoute("/graphql", graphql),
            Route("/healthz", healthz),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/asyncapi.json", Authenticated(asyncapi, services, limiter), methods=["GET"]),
            # Usage reports as CSV, with the same auth as /graphql (docs/usage.md).
            Route(
                "/usage.csv",
                Authenticated(usage_csv_app(services, PRINCIPAL_KEY), services, limiter),
                methods=["GET"],
            ),
            # The web console: public pages that call /graphql with the user's credentials.
            *console_routes(
                limits=services.limits,
                storage_url=services.settings.storage_url,
                appproxy_url=services.settings.appproxy_url,
            ),
        ],
    )
