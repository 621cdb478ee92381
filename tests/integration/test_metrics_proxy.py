"""The app proxy's ``/metrics`` on the real nats-server with a fake app: requests by kind and
status class, body bytes each way and WebSocket messages grow by exactly what went through;
routes and open WebSockets are what the proxy holds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from websockets.asyncio.client import connect

from events.bus import Bus
from events.store import EventStore
from schemas.app_tokens import COOKIE
from tests.integration.appproxy_support import ALICE, FakeSession, fake_app, running_proxy, token
from tests.metrics_support import Scraped


@pytest.fixture
async def app_port() -> AsyncIterator[int]:
    async with fake_app() as port:
        yield port


async def scrape(client: httpx.AsyncClient) -> Scraped:
    page = await client.get("/metrics")
    assert page.status_code == 200
    return Scraped(page.text)


async def test_proxy_traffic_is_counted_as_it_passes(bus: Bus, app_port: int) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False)])
    async with running_proxy(bus) as (proxy, base), httpx.AsyncClient(base_url=base) as client:
        await proxy.sync()
        prefix = f"/apps/{session.id}/web"
        before = await scrape(client)
        opened = await client.get(f"{prefix}/?token={token(session.id, 'web', ALICE)}")
        cookie = {"Cookie": f"{COOKIE}={opened.cookies[COOKIE]}"}
        client.cookies.clear()  # sent by hand, and left out of the request refused below
        posted = await client.post(f"{prefix}/form", content=b"a" * 1000, headers=cookie)
        refused = await client.get(f"{prefix}/")  # no cookie: 401
        ws_url = base.replace("http", "ws") + f"{prefix}/ws"
        async with connect(ws_url, additional_headers=cookie) as ws:
            for word in ("one", "two"):
                await ws.send(word)
                assert await asyncio.wait_for(ws.recv(), 5) == f"echo:{word}"
            during = await scrape(client)
        after = await scrape(client)

    assert (opened.status_code, posted.status_code, refused.status_code) == (303, 200, 401)
    requests = "jetyard_proxy_requests_total"

    def grew(name: str, **labels: str) -> float:
        return after.get(name, **labels) - before.get(name, **labels)

    assert grew(requests, kind="http", code="3xx") == 1
    assert grew(requests, kind="http", code="2xx") == 1
    assert grew(requests, kind="http", code="4xx") == 1
    assert grew(requests, kind="websocket", code="1xx") == 1
    assert grew("jetyard_proxy_websocket_messages_total", direction="to_app") == 2
    assert grew("jetyard_proxy_websocket_messages_total", direction="to_client") == 2
    # From clients: the form's body and "one", "two"; to clients: every body the proxy sent
    # (the app's JSON echo among them) and "echo:one", "echo:two".
    assert grew("jetyard_proxy_bytes_total", direction="from_client") == 1000 + 6
    assert grew("jetyard_proxy_bytes_total", direction="to_client") >= len(posted.content) + 16
    assert during.get("jetyard_proxy_open_websockets") == 1
    assert after.get("jetyard_proxy_open_websockets") == 0
    assert after.get("jetyard_proxy_routes") >= 1
    assert after.get("jetyard_consumer_lag", consumer="appproxy", kind="fold") >= 0
