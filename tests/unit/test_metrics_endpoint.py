"""``/metrics`` itself, with no server: the page parses with Prometheus' parser, reads before a
scrape are made (one that fails leaves the rest), HTTP requests are counted by route template
and status as their answers start, the proxy's counters count statuses and bytes, consumers'
lag is what their reads say, and the listener serves on a free port and stands aside (no
exception, no exit) when its port is taken."""

from __future__ import annotations

import socket

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from events.metrics import EVENTS_APPENDED, ConsumerLag, Metrics
from httpserver.metrics import metrics_listener
from services.appproxy.metrics import ProxyMetrics
from services.http_metrics import CountedHttp, HttpMetrics
from tests.metrics_support import Scraped


async def scrape(metrics: Metrics) -> Scraped:
    return Scraped((await metrics.render()).decode())


async def test_the_page_holds_the_process_counters_and_what_reads_found() -> None:
    metrics = Metrics()
    lag = ConsumerLag()
    metrics.add(lag)
    metrics.before_scrape(lag.refresh)

    async def behind() -> int:
        return 7

    async def unknown() -> None:
        return None

    async def broken() -> int:
        raise RuntimeError("NATS is away")

    lag.add("scheduler", "fold", behind)
    lag.add("tenancy", "fold", unknown)
    lag.add("storage", "commands", broken)
    before = (await scrape(metrics)).value("jetyard_events_appended_total", aggregate="session")
    EVENTS_APPENDED.labels("session").inc(2)

    page = await scrape(metrics)

    assert page.get("jetyard_consumer_lag", consumer="scheduler", kind="fold") == 7
    assert page.where("jetyard_consumer_lag", consumer="tenancy") == {}
    assert page.where("jetyard_consumer_lag", consumer="storage") == {}
    assert page.get("jetyard_events_appended_total", aggregate="session") == (before or 0) + 2


async def test_a_failing_read_leaves_the_rest_of_the_page() -> None:
    metrics = Metrics()

    async def failing() -> None:
        raise TimeoutError

    metrics.before_scrape(failing)
    page = await scrape(metrics)
    assert "jetyard_events_appended" in page.families


async def test_get_answers_the_text_format_and_other_methods_are_refused() -> None:
    metrics = Metrics()
    transport = httpx.ASGITransport(app=metrics)
    async with httpx.AsyncClient(transport=transport, base_url="http://metrics") as client:
        got = await client.get("/metrics")
        refused = await client.post("/metrics")
    assert got.status_code == 200
    assert got.headers["content-type"].startswith("text/plain; version=0.0.4")
    Scraped(got.text)
    assert refused.status_code == 405


async def test_requests_are_counted_by_route_template_and_status() -> None:
    metrics = Metrics()

    async def thing(request: Request) -> PlainTextResponse:
        if request.path_params["name"] == "broken":
            raise RuntimeError("a bug")
        return PlainTextResponse("ok")

    app = Starlette(
        routes=[Route("/things/{name}", thing, methods=["GET"]), Route("/metrics", metrics)],
        middleware=[Middleware(CountedHttp, counted=HttpMetrics(metrics))],
    )
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
        for name in ("a", "b", "c", "broken"):
            await client.get(f"/things/{name}")
        await client.post("/things/a")
        await client.get("/nowhere")
        page = Scraped((await client.get("/metrics")).text)

    requests = "jetyard_http_requests_total"
    assert page.get(requests, route="/things/{name}", method="GET", status="200") == 3
    assert page.get(requests, route="/things/{name}", method="GET", status="500") == 1
    assert page.get(requests, route="/things/{name}", method="POST", status="405") == 1
    assert page.get(requests, route="unmatched", method="GET", status="404") == 1
    # A scrape is counted when its answer starts, after its page was rendered.
    assert page.value(requests, route="/metrics", method="GET", status="200") is None
    durations = "jetyard_http_request_duration_seconds_count"
    assert page.get(durations, route="/things/{name}") == 5


async def test_the_proxy_counts_statuses_and_bytes_each_way() -> None:
    metrics = Metrics()
    counted = ProxyMetrics(metrics)
    sent: list[object] = []

    async def send(message: object) -> None:
        sent.append(message)

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"12345", "more_body": False}

    counting = counted.sending(send)
    await counting({"type": "http.response.start", "status": 201, "headers": []})
    await counting({"type": "http.response.body", "body": b"abc", "more_body": True})
    await counting({"type": "http.response.body", "body": b"de"})
    await counted.receiving(receive)()
    counted.http_status(502)
    counted.websocket_status(101)
    counted.websocket_status(403)

    page = await scrape(metrics)

    assert len(sent) == 3
    assert page.get("jetyard_proxy_requests_total", kind="http", code="2xx") == 1
    assert page.get("jetyard_proxy_requests_total", kind="http", code="5xx") == 1
    assert page.get("jetyard_proxy_requests_total", kind="websocket", code="1xx") == 1
    assert page.get("jetyard_proxy_requests_total", kind="websocket", code="4xx") == 1
    assert page.get("jetyard_proxy_bytes_total", direction="to_client") == 5
    assert page.get("jetyard_proxy_bytes_total", direction="from_client") == 5


async def test_the_listener_serves_on_a_free_port_and_stands_aside_on_a_taken_one() -> None:
    metrics = Metrics()
    async with metrics_listener(metrics, "127.0.0.1", 0, "tests") as url:
        assert url is not None and url.endswith("/metrics")
        async with httpx.AsyncClient() as client:
            page = await client.get(url)
            elsewhere = await client.get(url.removesuffix("/metrics") + "/other")
        assert page.status_code == 200
        Scraped(page.text)
        assert elsewhere.status_code == 404
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        async with metrics_listener(metrics, "127.0.0.1", port, "tests") as none:
            assert none is None
    async with metrics_listener(metrics, "127.0.0.1", None, "tests") as off:
        assert off is None


def test_a_durable_needs_a_bus() -> None:
    with pytest.raises(ValueError, match="bus"):
        ConsumerLag().durable("scheduler")
