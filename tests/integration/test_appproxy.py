"""The app proxy on the real nats-server, with a fake app on a free port registered by the
events the proxy folds: HTTP and WebSocket pass with the owner's token and then its cookie;
no credentials 401, someone else's 403; a session's end makes its URL 410 and closes its open
WebSockets; a proxy started afterwards serves the same routes from the log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import websockets
from websockets.asyncio.client import connect

from events.bus import Bus
from events.domain.session import SessionTerminated
from events.store import EventStore
from schemas.app_tokens import COOKIE
from tests.integration.appproxy_support import (
    ALICE,
    BOB,
    FakeSession,
    fake_app,
    free_ports,
    running_proxy,
    token,
)


@pytest.fixture
async def app_port() -> AsyncIterator[int]:
    async with fake_app() as port:
        yield port


async def _opened(client: httpx.AsyncClient, url: str) -> str:
    """Open a ``startApp``-style URL: the cookie the proxy set for it."""
    answer = await client.get(url)
    assert answer.status_code == 303, answer.text
    assert "token=" not in answer.headers["location"]
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Path=/apps/" in cookie
    return answer.cookies[COOKIE]


async def test_the_owner_reaches_the_app_with_a_token_then_its_cookie(
    bus: Bus, app_port: int
) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False)])
    async with running_proxy(bus) as (proxy, base), httpx.AsyncClient(base_url=base) as client:
        await proxy.sync()
        prefix = f"/apps/{session.id}/web"
        cookie = await _opened(client, f"{prefix}/page?x=1&token={token(session.id, 'web', ALICE)}")

        got = await client.get(
            f"{prefix}/page?x=1", headers={"Cookie": f"{COOKIE}={cookie}; mine=1"}
        )
        posted = await client.post(f"{prefix}/form", content=b"a" * 100_000,
                                   headers={"Cookie": f"{COOKIE}={cookie}"})  # fmt: skip

    assert got.status_code == 200, got.text
    assert got.json() == {"method": "GET", "path": "/page", "query": "x=1", "cookie": "mine=1",
                          "body": "", "prefix": prefix}  # fmt: skip
    assert posted.json()["body"] == "a" * 100_000


async def test_who_may_pass(bus: Bus, app_port: int) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False), ("open", app_port, True)])
    async with running_proxy(bus) as (proxy, base), httpx.AsyncClient(base_url=base) as client:
        await proxy.sync()
        web = f"/apps/{session.id}/web/"

        nobody = await client.get(web)
        bobs = await client.get(f"{web}?token={token(session.id, 'web', BOB)}")
        admin = await client.get(f"{web}?token={token(session.id, 'web', BOB, admin=True)}")
        other_app = await client.get(f"{web}?token={token(session.id, 'open', ALICE)}")
        forged = await client.get(
            web, headers={"Cookie": f"{COOKIE}={token(session.id, 'web', ALICE)}"}
        )
        public = await client.get(f"/apps/{session.id}/open/")
        unknown = await client.get(f"/apps/{session.id}/nothing/")

    assert nobody.status_code == 401
    assert bobs.status_code == 403
    assert admin.status_code == 303
    assert other_app.status_code == 403
    assert forged.status_code == 401  # a URL token is no cookie
    assert public.status_code == 200
    assert unknown.status_code == 404


async def test_a_websocket_echoes_until_the_session_ends_then_the_url_is_gone(
    bus: Bus, app_port: int
) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False)])
    async with running_proxy(bus) as (proxy, base), httpx.AsyncClient(base_url=base) as client:
        await proxy.sync()
        prefix = f"/apps/{session.id}/web"
        cookie = await _opened(client, f"{prefix}/?token={token(session.id, 'web', ALICE)}")
        ws_url = base.replace("http", "ws") + f"{prefix}/ws"
        with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
            await connect(ws_url)
        assert refused.value.response.status_code == 401

        async with connect(ws_url, additional_headers={"Cookie": f"{COOKIE}={cookie}"}) as ws:
            await ws.send("hello")
            assert await asyncio.wait_for(ws.recv(), 5) == "echo:hello"
            assert proxy.connections.count(session.id) == 1

            await session.write(SessionTerminated(reason="user request", exit_code=0))
            with pytest.raises(websockets.exceptions.ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10)
            assert ws.close_code == 1001

        await proxy.sync()
        gone = await client.get(f"{prefix}/", headers={"Cookie": f"{COOKIE}={cookie}"})
    assert gone.status_code == 410
    assert proxy.connections.count() == 0


async def test_a_proxy_started_later_serves_the_routes_from_the_log(
    bus: Bus, app_port: int
) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False)])
    async with running_proxy(bus) as (proxy, _):
        await proxy.sync()
    async with running_proxy(bus) as (_, base), httpx.AsyncClient(base_url=base) as client:
        prefix = f"/apps/{session.id}/web"
        cookie = await _opened(client, f"{prefix}/?token={token(session.id, 'web', ALICE)}")
        again = await client.get(f"{prefix}/", headers={"Cookie": f"{COOKIE}={cookie}"})
    assert again.status_code == 200


async def test_port_mode_gives_each_app_a_port_of_its_own(bus: Bus, app_port: int) -> None:
    """The path URL sends the browser to the app's port, token and all; there the token
    becomes that port's cookie and the app sees its own root. Another user's cookie does not
    pass; a port freed by a session's end goes to the next app, and the old cookie is
    refused there."""
    ports = free_ports(40)  # the log is shared: other tests' sessions hold slots too
    first, second = FakeSession(EventStore(bus)), FakeSession(EventStore(bus))
    await first.start(ALICE, [("web", app_port, False)])
    await second.start(BOB, [("web", app_port, False)])
    async with running_proxy(bus, app_ports=ports) as (proxy, base), httpx.AsyncClient() as client:
        await proxy.sync()
        mine, bobs_port = (ports[proxy.table.slots[(s.id, "web")]] for s in (first, second))
        path_url = f"{base}/apps/{first.id}/web/page?x=1&token={token(first.id, 'web', ALICE)}"
        sent = await client.get(path_url)
        assert sent.status_code == 307
        at_port = sent.headers["location"]
        assert at_port.startswith(f"http://127.0.0.1:{mine}/page?x=1&token=")
        opened = await client.get(at_port)
        assert opened.status_code == 303 and opened.headers["location"] == "/page?x=1"
        assert "Path=/;" in opened.headers["set-cookie"]
        alice = opened.cookies[f"{COOKIE}_{mine}"]
        client.cookies.clear()  # every request below says what it carries
        home = f"http://127.0.0.1:{mine}"
        cookie = {"Cookie": f"{COOKIE}_{mine}={alice}; mine=1"}
        got = await client.get(f"{home}/page?x=1", headers=cookie)
        assert got.status_code == 200, got.text
        assert got.json() == {"method": "GET", "path": "/page", "query": "x=1", "cookie": "mine=1",
                              "body": "", "prefix": None}  # fmt: skip
        async with connect(f"ws://127.0.0.1:{mine}/ws", additional_headers=cookie) as ws:
            await ws.send("hi")
            assert await asyncio.wait_for(ws.recv(), 5) == "echo:hi"

        bobs = await client.get(
            f"http://127.0.0.1:{bobs_port}/?token={token(second.id, 'web', BOB)}"
        )
        bob = bobs.cookies[f"{COOKIE}_{bobs_port}"]
        client.cookies.clear()
        as_bob = await client.get(f"{home}/", headers={"Cookie": f"{COOKIE}_{mine}={bob}"})
        assert as_bob.status_code == 403
        assert (await client.get(f"{home}/")).status_code == 401

        await first.write(SessionTerminated(reason="user request", exit_code=0))
        await proxy.sync()
        assert (await client.get(f"{home}/", headers=cookie)).status_code == 404
        third = FakeSession(EventStore(bus))
        await third.start(BOB, [("web", app_port, False)])
        await proxy.sync()
        assert ports[proxy.table.slots[(third.id, "web")]] == mine
        reused = await client.get(f"{home}/", headers=cookie)
        assert reused.status_code == 403  # the port is the third session's app now
