"""The ``/metrics`` listener of the services that serve no HTTP of their own (scheduler,
tenancy, projections, agent): a service's ``events.metrics.Metrics`` (an ASGI app) on a port of
its own. No subjects."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from httpserver.server import bound_socket, listening

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def metrics_listener(
    metrics: ASGIApp, host: str, port: int | None, what: str
) -> AsyncIterator[str | None]:
    """Serve ``metrics`` at ``http://host:port/metrics`` for the time of the block, entered
    once listening with that URL. With no port, or a port that cannot be had, nothing is
    served and the block gets ``None``: a service does not stop for want of its metrics.

    For the services with no HTTP listener of their own (scheduler, tenancy, projections,
    agent); the others answer ``/metrics`` on theirs."""
    if port is None:
        yield None
        return
    try:
        sock = bound_socket(host, port)  # here, not by uvicorn: it exits the process if it cannot
    except OSError as exc:
        log.error("%s: /metrics cannot listen on %s:%s (%s); serving none", what, host, port, exc)
        yield None
        return

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/metrics":
            await _not_found(send)
            return
        await metrics(scope, receive, send)

    config = uvicorn.Config(app, lifespan="off", access_log=False, log_level="warning")
    try:
        async with listening(uvicorn.Server(config), f"{what} metrics", sockets=[sock]):
            yield f"http://{host}:{sock.getsockname()[1]}/metrics"
    finally:
        sock.close()


async def _not_found(send: Send) -> None:
    body = b"see /metrics\n"
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": 404, "headers": headers})
    await send({"type": "http.response.body", "body": body})
