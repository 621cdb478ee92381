"""The gateway's Prometheus metrics, served at ``/metrics`` on its listener (``http.py``):
its HTTP requests and errors (``services.http_metrics``), the lag of its quota-use fold and
the process' shared counters. No subjects of its own (the fold's lag is one consumer-info
request per scrape)."""

from __future__ import annotations

from starlette.middleware import Middleware

from events.metrics import Metrics, lag_metrics
from services.gateway.context import Services
from services.http_metrics import CountedHttp, HttpMetrics


def gateway_metrics(services: Services) -> tuple[Metrics, Middleware]:
    """The gateway's metrics, and the middleware that counts its HTTP requests into them."""
    metrics = lag_metrics(services.quotas.fold)
    return metrics, Middleware(CountedHttp, counted=HttpMetrics(metrics))
