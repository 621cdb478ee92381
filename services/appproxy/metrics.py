"""The app proxy's Prometheus metrics (docs/metrics.md), served at ``/metrics`` on its
listener: requests by kind (HTTP, WebSocket) and status class, bytes and WebSocket messages
each way, open WebSockets and routes, its route fold's lag; and per model-serving endpoint,
requests by status class, their latency, requests in flight and replicas serving. No subjects.

The proxy's hot path only calls ``inc()`` on counters made at start (no label lookup, no
label per session or app: a label per session would grow without bound). Endpoints are few and
named by people: their series are labelled by name, each made at its first request.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Histogram
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


LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                   120.0)  # fmt: skip
"""Model answers take from milliseconds (embeddings) to minutes (long completions)."""


class EndpointMetrics:
    """Per endpoint (``endpoints/forward.py`` calls ``answered`` once per answered request
    to a known endpoint), and what ``EndpointState`` reads when scraped."""

    def __init__(self, metrics: Metrics, service: AppProxyService) -> None:
        self._requests = Counter(
            "jetyard_endpoint_requests",
            "Requests to a model-serving endpoint by status class (the replicas' own statuses "
            "and the proxy's 401/410/502/503)",
            ["endpoint", "code"],
            registry=metrics.registry,
        )
        self._seconds = Histogram(
            "jetyard_endpoint_request_duration_seconds",
            "From a request's arrival at the proxy to its answer's last byte, time held "
            "waiting for a replica included",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=metrics.registry,
        )
        metrics.add(EndpointState(service))

    def answered(self, endpoint: str, status: int, seconds: float) -> None:
        self._requests.labels(endpoint, f"{min(max(status // 100, 1), 5)}xx").inc()
        self._seconds.labels(endpoint).observe(seconds)


class EndpointState:
    """Per endpoint now: requests in flight at this proxy, replicas serving."""

    def __init__(self, service: AppProxyService) -> None:
        self._service = service

    def collect(self) -> Iterable[Metric]:
        inflight = GaugeMetricFamily(
            "jetyard_endpoint_inflight",
            "Requests to the endpoint in flight at this proxy now (held ones included)",
            labels=["endpoint"],
        )
        serving = GaugeMetricFamily(
            "jetyard_endpoint_replicas_serving",
            "The endpoint's replicas in the rotation (running, healthy, taking traffic)",
            labels=["endpoint"],
        )
        loads = self._service.balancer.endpoints
        for endpoint in self._service.table.endpoints.by_id.values():
            if endpoint.destroyed:
                continue
            load = loads.get(endpoint.id)
            inflight.add_metric([endpoint.name], load.total.inflight if load else 0)
            serving.add_metric([endpoint.name], len(endpoint.serving()))
        yield from (inflight, serving)


def proxy_metrics(service: AppProxyService) -> tuple[Metrics, ProxyMetrics]:
    metrics = Metrics()
    metrics.add(ProxyState(service))
    consumer_lag(metrics).fold(service.fold)
    return metrics, ProxyMetrics(metrics)
