"""App URLs cannot be replayed, on the real nats-server: a URL token opens the app once — a
second use answers 401 on the same proxy, on another replica and on one started later — over
HTTP and over a WebSocket; an owner's revocation voids the cookies and URLs issued before it
on every replica, and a URL issued after it works."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from events.bus import Bus
from events.store import EventStore
from schemas.app_tokens import COOKIE, revoked_key
from schemas.subjects import GRANTS_BUCKET
from services.appproxy.service import AppProxyService
from tests.integration.appproxy_support import ALICE, FakeSession, fake_app, running_proxy, token


@pytest.fixture
async def app_port() -> AsyncIterator[int]:
    async with fake_app() as port:
        yield port


async def _open(base: str, url: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base) as client:
        return await client.get(url)


async def test_a_url_opens_the_app_once_on_any_replica_and_after_a_restart(
    bus: Bus, app_port: int
) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False)])
    url = f"/apps/{session.id}/web/?token={token(session.id, 'web', ALICE)}"
    async with running_proxy(bus) as (one, first), running_proxy(bus) as (two, second):
        await one.sync()
        await two.sync()
        opened, replayed, elsewhere = await asyncio.gather(
            _open(first, url), _open(first, url), _open(second, url)
        )
        statuses = sorted(r.status_code for r in (opened, replayed, elsewhere))
        assert statuses == [303, 401, 401]  # exactly one of three at once, whichever it was
        refused = next(r for r in (opened, replayed, elsewhere) if r.status_code == 401)
        assert "used already" in refused.text
    async with running_proxy(bus) as (later, base):
        await later.sync()
        assert (await _open(base, url)).status_code == 401


async def test_a_used_url_does_not_open_a_websocket(bus: Bus, app_port: int) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False)])
    ws_url = f"/apps/{session.id}/web/ws?token={token(session.id, 'web', ALICE)}"
    async with running_proxy(bus) as (proxy, base):
        await proxy.sync()
        where = base.replace("http", "ws", 1) + ws_url
        async with connect(where, open_timeout=10) as ws:
            await ws.send("hello")
            assert await ws.recv() == "echo:hello"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(where, open_timeout=10):
                pass
    assert refused.value.response.status_code == 401


async def _revoke(bus: Bus, session_id: str, app: str | None) -> None:
    """What ``revokeAppAccess`` writes."""
    kv = await bus.js.key_value(GRANTS_BUCKET)
    await kv.put(revoked_key(session_id, app), repr(time.time()).encode())


async def _passes(proxy: AppProxyService, base: str, path: str, cookie: str) -> int:
    async with httpx.AsyncClient(base_url=base) as client:
        answer = await client.get(path, headers={"Cookie": f"{COOKIE}={cookie}"})
    return answer.status_code


async def _wait_for(status: int, check: object, what: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if await check() == status:  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(what)


async def test_a_revocation_voids_what_was_issued_before_it_on_every_replica(
    bus: Bus, app_port: int
) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", app_port, False), ("other", app_port, False)])
    prefix = f"/apps/{session.id}/web/"
    async with running_proxy(bus) as (one, first), running_proxy(bus) as (two, second):
        await one.sync()
        await two.sync()
        opened = await _open(first, f"{prefix}?token={token(session.id, 'web', ALICE)}")
        cookie = opened.cookies[COOKIE]
        other = await _open(first, f"/apps/{session.id}/other/?token="
                            f"{token(session.id, 'other', ALICE)}")  # fmt: skip
        other_cookie = other.cookies[COOKIE]
        unused = token(session.id, "web", ALICE)
        assert await _passes(two, second, prefix, cookie) == 200  # cookies work on any replica

        await _revoke(bus, session.id, "web")
        for proxy, base in ((one, first), (two, second)):
            await _wait_for(
                401, lambda p=proxy, b=base: _passes(p, b, prefix, cookie), "the cookie refused"
            )
        assert (await _open(first, f"{prefix}?token={unused}")).status_code == 401
        other_path = f"/apps/{session.id}/other/"
        assert await _passes(one, first, other_path, other_cookie) == 200  # only web was revoked

        await asyncio.sleep(0.01)
        fresh = await _open(second, f"{prefix}?token={token(session.id, 'web', ALICE)}")
        assert fresh.status_code == 303
        assert await _passes(one, first, prefix, fresh.cookies[COOKIE]) == 200

        await _revoke(bus, session.id, None)  # every app of the session
        await _wait_for(
            401, lambda: _passes(one, first, other_path, other_cookie), "every app revoked"
        )
