"""The app proxy's Prometheus metrics (docs/metrics.md), served at ``/metrics`` on its
listener: requests by kind (HTTP, WebSocket) and status class, bytes and WebSocket messages
each way, open WebSockets and routes, its route fold's lag. No subjects.

The proxy's hot path only calls ``inc()`` on counters made at start (no label lookup, no
label per session or app: a label per session would grow without bound).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from starlette.types import Message, Receive, Send

from events.metrics import Metrics, consumer_lag
from services.appproxy.service import AppProxyService

WS_ACCEPTED = 101


class ProxyMetrics:
    """The proxy's counters, registered on its service's ``Metrics``."""

    def __init__(self, metrics: Metrics) -> None:
        requests = Counter(
            "jetyard_proxy_requests",
            "Requests through the proxy by kind (http, websocket) and status class (a "
            "WebSocket taken over counts as 1xx)",
            ["kind", "code"],
            registry=metrics.registry,
        )
        self.http = [requests.labels("http", f"{c}xx") for c in range(6)]
        self.websocket = [requests.labels("websocket", f"{c}xx") for c in range(6)]
        moved = Counter(
            "jetyard_proxy_bytes",
            "Body bytes (HTTP) and payload bytes (WebSocket; text frames in characters) "
            "through the proxy: from_client is what clients sent, to_client what they got",
            ["direction"],
            registry=metrics.registry,
        )
        self.from_client, self.to_client = moved.labels("from_client"), moved.labels("to_client")
        messages = Counter(
            "jetyard_proxy_websocket_messages",
            "WebSocket messages relayed: to_app from clients, to_client from apps",
            ["direction"],
            registry=metrics.registry,
        )
        self.messages_to_app = messages.labels("to_app")
        self.messages_to_client = messages.labels("to_client")

    def http_status(self, status: int) -> None:
        self.http[min(max(status // 100, 0), 5)].inc()

    def websocket_status(self, status: int) -> None:
        self.websocket[min(max(status // 100, 0), 5)].inc()

    def sending(self, send: Send) -> Send:
        """``send``, counting the answer's status and body bytes."""

        async def counted(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.body":
                self.to_client.inc(len(message.get("body", b"")))
            elif kind == "http.response.start":
                self.http_status(message["status"])
            await send(message)

        return counted

    def receiving(self, receive: Receive) -> Receive:
        """``receive``, counting the request's body bytes."""

        async def counted() -> Message:
            message = await receive()
            body = message.get("body")
            if body:
                self.from_client.inc(len(body))
            return message

        return counted


class ProxyState:
    """What the proxy holds now: its routes and open WebSockets."""

    def __init__(self, service: AppProxyService) -> None:
        self._service = service

    def collect(self) -> Iterable[Metric]:
        routes = GaugeMetricFamily("jetyard_proxy_routes", "Apps the proxy routes to now")
        routes.add_metric([], len(self._service.table.routes()))
        sockets = GaugeMetricFamily("jetyard_proxy_open_websockets", "WebSockets open now")
        sockets.add_metric([], self._service.connections.count())
        yield from (routes, sockets)


def proxy_metrics(service: AppProxyService) -> tuple[Metrics, ProxyMetrics]:
    metrics = Metrics()
    metrics.add(ProxyState(service))
    consumer_lag(metrics).fold(service.fold)
    return metrics, ProxyMetrics(metrics)
