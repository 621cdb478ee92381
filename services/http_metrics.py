"""HTTP requests and errors for Prometheus, as ASGI middleware in front of a Starlette app (the
gateway, the storage data plane): ``jetyard_http_requests_total{route, method, status}`` and
``jetyard_http_request_duration_seconds{route}``. No subjects.

The route label is the matched route's template (``/folders/{volume}/{folder}/download``),
never the path: a label per folder or per session would grow without bound. A request is
counted when its answer starts (so a client that reads its answer and then scrapes sees it
counted); its duration when the answer is sent.
"""

from __future__ import annotations

import time

from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from events.metrics import Metrics

UNMATCHED = "unmatched"
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class HttpMetrics:
    """The counters of one listener, registered on its service's ``Metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        self.requests = Counter(
            "jetyard_http_requests",
            "HTTP requests answered, by route template, method and status code",
            ["route", "method", "status"],
            registry=metrics.registry,
        )
        self.duration = Histogram(
            "jetyard_http_request_duration_seconds",
            "Time from a request's arrival to its answer's last byte, by route template",
            ["route"],
            buckets=DURATION_BUCKETS,
            registry=metrics.registry,
        )


def route_of(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


class CountedHttp:
    """Starlette middleware (``Middleware(CountedHttp, counted=HttpMetrics(...))``): it runs
    outside the router, which names the matched route in the scope it shares."""

    def __init__(self, app: ASGIApp, counted: HttpMetrics) -> None:
        self.app = app
        self.counted = counted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        counted, started = self.counted, time.perf_counter()
        answered = False

        async def counting(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start" and not answered:
                answered = True
                status = str(message["status"])
                counted.requests.labels(route_of(scope), scope["method"], status).inc()
            await send(message)

        try:
            await self.app(scope, receive, counting)
        except BaseException:
            if not answered:  # the server answers 500 for it
                counted.requests.labels(route_of(scope), scope["method"], "500").inc()
            raise
        finally:
            counted.duration.labels(route_of(scope)).observe(time.perf_counter() - started)
