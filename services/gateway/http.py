"""The gateway's HTTP app: GraphQL (queries, mutations, graphql-transport-ws subscriptions) at
``/graphql``, the probes ``/livez`` (alive), ``/readyz`` (caught up with the log) and
``/healthz`` (ready, with positions and quarantined events; ``core.probes``),
``POST /join`` (a new machine's join token exchanged for its agent's settings,
``admin_api.join_desk``), ``/asyncapi.json`` (the AsyncAPI document of every command,
outcome and event subject, built from the code at start), the usage reports as CSV at
``/usage.csv`` (``usage.download``), and the web console at ``/console/``
(``services.gateway.console``: static pages, public);
``/metrics`` for Prometheus (``services.gateway.metrics``, docs/metrics.md). A subscriber that
leaves while it is sent to is one INFO line, not strawberry's ERROR traceback.

GraphQL over HTTP, ``/asyncapi.json`` and ``/usage.csv`` sit behind the HTTP edge
(``services.gateway.edge``: authenticated, rate limited, recorded in the access log);
WebSockets authenticate in ``connection_init``. Without credentials only ``login`` (and the
GraphiQL page, a GET with no query) is answered: introspection and ``/asyncapi.json`` need a
signed-in caller like every other operation.
"""

from __future__ import annotations

import logging
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
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
)

from commands.asyncapi import build_document
from events.store import EventStore
from services.gateway.admin_api.join_desk import JoinDesk, JoinSettings
from services.gateway.auth.authenticate import AuthError
from services.gateway.auth.ratelimit import Limiter, LocalLimiter
from services.gateway.console.routes import console_routes
from services.gateway.context import Context, Services
from services.gateway.core import probes
from services.gateway.edge import (
    BEARER_KEY,
    PRINCIPAL_KEY,
    ASGIApp,
    Authenticated,
    Message,
    Receive,
    Scope,
    Send,
    record_access,
)
from services.gateway.errors import is_disconnect
from services.gateway.graphiql import ASSETS, ASSETS_URL, local_page
from services.gateway.metrics import gateway_metrics
from services.gateway.schema import schema
from services.gateway.usage.download import usage_csv_app

log = logging.getLogger(__name__)

GRAPHIQL_PAGE = local_page()


class _TransportWS(BaseGraphQLTransportWSHandler[Context, None]):
    async def handle_task_exception(self, error: Exception) -> None:
        """A subscriber that left while it was being sent to is expected (INFO, no
        traceback); anything else is strawberry's ERROR with its traceback."""
        if is_disconnect(error):
            log.info("a subscriber left while being sent to (%r)", error)
            return
        await super().handle_task_exception(error)


class JetyardGraphQL(GraphQL[Context, None]):
    graphql_transport_ws_handler_class = _TransportWS

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
            await record_access(
                services, None, context.source, operation, f"unauthenticated: {exc.code}"
            )
            raise ConnectionRejectionError({"code": exc.code, "message": exc.message}) from None
        context.principal = principal
        await record_access(services, principal, context.source, operation, "ok")


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


def _probe(answer: tuple[bool, dict[str, Any]]) -> JSONResponse:
    ok, body = answer
    # Never cached: a probe's answer is about this moment.
    return JSONResponse(body, status_code=200 if ok else 503, headers={"cache-control": "no-store"})


def build_app(services: Services) -> Starlette:
    graphql = JetyardGraphQL(services)
    store = EventStore(services.bus)
    limiter: Limiter = services.limiter or LocalLimiter()

    # Built once: the document depends only on the code this process runs.
    asyncapi = JSONResponse(build_document())

    async def live(_: Request) -> JSONResponse:
        return _probe(await probes.livez())

    async def ready(_: Request) -> JSONResponse:
        return _probe(await probes.readyz(services, store))

    async def healthz(_: Request) -> JSONResponse:
        return _probe(await probes.healthz(services, store))

    metrics, counted = gateway_metrics(services)  # docs/metrics.md
    return Starlette(
        middleware=[counted],
        routes=[
            Mount(ASSETS_URL, app=_cached(StaticFiles(directory=ASSETS))),
            Route("/graphql", Authenticated(graphql, services, limiter), methods=["GET", "POST"]),
            WebSocketRoute("/graphql", graphql),
            Route("/livez", live, methods=["GET"]),
            Route("/readyz", ready, methods=["GET"]),
            Route("/healthz", healthz),
            Route("/metrics", metrics, methods=["GET"]),
            # A new machine's join: the token is its credential (admin_api.join_desk).
            Route("/join", JoinDesk(services, limiter, JoinSettings()).answer, methods=["POST"]),
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
