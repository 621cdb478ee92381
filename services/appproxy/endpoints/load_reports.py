"""The proxy's load reports, which the serving controller's scaling rules read: every second,
on core NATS ``jy.serving.load.<proxy id>`` (not kept), a JSON object

    {"proxy": "<proxy id>", "at": <unix seconds>,
     "endpoints": {"<endpoint id>": {"requests": <total>, "inflight": <now>,
                   "latency_ms": [<total per bucket>],
                   "replicas": {"<number>": {"requests": <total>, "inflight": <now>}}}}}

with the counts of ``balance.Balancer``: totals since this proxy started (readers take rates
and latency quantiles from their differences: ``schemas.serving_load``), requests in flight
now. Publishes only; a report that cannot be sent is logged and the next one goes a second
later.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from events.bus import Bus
from schemas.subjects import SERVING_LOAD_PREFIX
from services.appproxy.endpoints.balance import Balancer
from services.appproxy.endpoints.table import EndpointTable

log = logging.getLogger(__name__)
INTERVAL_S = 1.0


def subject(proxy_id: str) -> str:
    return f"{SERVING_LOAD_PREFIX}.{proxy_id}"


def report(proxy_id: str, at: float, balancer: Balancer, table: EndpointTable) -> dict[str, Any]:
    """The report of now; first the counts of replicas and endpoints gone (with nothing in
    flight) are forgotten, so a report stays as small as what is live."""
    for endpoint_id in list(balancer.endpoints):
        endpoint = table.by_id.get(endpoint_id)
        live = None if endpoint is None or endpoint.destroyed else frozenset(endpoint.replicas)
        balancer.prune(endpoint_id, live)
    endpoints = {
        endpoint_id: {
            "requests": load.total.requests,
            "inflight": load.total.inflight,
            "latency_ms": list(load.latency),
            "replicas": {
                str(n): {"requests": c.requests, "inflight": c.inflight}
                for n, c in sorted(load.replicas.items())
            },
        }
        for endpoint_id, load in balancer.endpoints.items()
    }
    return {"proxy": proxy_id, "at": at, "endpoints": endpoints}


async def publish_every_second(
    bus: Bus, proxy_id: str, balancer: Balancer, table: EndpointTable
) -> None:
    """Publish a report every ``INTERVAL_S`` until cancelled."""
    to = subject(proxy_id)
    while True:
        body = json.dumps(report(proxy_id, time.time(), balancer, table)).encode()
        try:
            await bus.nc.publish(to, body)
        except Exception as exc:  # a lost connection: the next report goes a second later
            log.warning("appproxy: could not publish its load report: %r", exc)
        await asyncio.sleep(INTERVAL_S)
