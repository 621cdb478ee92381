"""The gateway's HTTP app: GraphQL (queries, mutations, graphql-transport-ws subscriptions)
at ``/graphql`` with GraphiQL, and ``/healthz`` (200 only when the views have caught up)."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL

from events.store import EventStore
from services.gateway.schema import Context, schema


class JetyardGraphQL(GraphQL[Context, None]):
    def __init__(self, context: Context) -> None:
        super().__init__(
            schema,
            graphql_ide="graphiql" if context.settings.graphiql else None,
            subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL],
        )
        self._context = context

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket | None = None
    ) -> Context:
        return self._context


async def health(context: Context, store: EventStore) -> tuple[bool, dict[str, Any]]:
    """Caught up = the views hold every event the log had when we asked."""
    try:
        log_end = await store.stream_last_seq()
        views = await context.views.position()
    except Exception as exc:
        return False, {"ok": False, "error": repr(exc)}
    ok = views >= log_end and context.bus.nc.is_connected
    return ok, {"ok": ok, "log_end": log_end, "views_position": views}


def build_app(context: Context) -> Starlette:
    graphql = JetyardGraphQL(context)
    store = EventStore(context.bus)

    async def healthz(_: Request) -> JSONResponse:
        ok, body = await health(context, store)
        return JSONResponse(body, status_code=200 if ok else 503)

    return Starlette(
        routes=[
            Route("/graphql", graphql, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", graphql),
            Route("/healthz", healthz),
        ]
    )
