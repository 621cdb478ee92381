"""``startApp`` on the real gateway, opened through a real app proxy: the URL it returns leads
to the app; a session's app that is not open, or a session that is not running, is refused
with a sentence that says why; every running session has a terminal; the URL opens once, and
``revokeAppAccess`` voids the cookie it became."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from events.bus import Bus
from events.store import EventStore
from schemas.app_tokens import COOKIE
from tests.integration.appproxy_support import ALICE, KEY, FakeSession, fake_app, running_proxy
from tests.integration.gateway_support import Gateway, person, running_gateway
from tests.integration.node_support import eventually

START = """mutation($id: ID!, $app: String!) { startApp(sessionId: $id, app: $app) {
    url expiresAt } }"""
BASE = "http://proxy.example"


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(
        bus, tmp_path_factory.mktemp("apps"), appproxy_url=BASE, appproxy_token_key=KEY
    ) as gw:
        yield gw


async def test_start_app_gives_a_url_that_opens_the_app(bus: Bus, gateway: Gateway) -> None:
    async with fake_app() as port, running_proxy(bus) as (proxy, base):
        session = FakeSession(EventStore(bus))
        await session.start(ALICE, [("web", port, False)])

        async def started() -> dict[str, Any] | None:
            body = await gateway.gql(START, id=session.id, app="web")
            return body["data"]["startApp"] if "errors" not in body else None

        access = await eventually(started, what="startApp to answer")
        url = urlsplit(access["url"])
        assert f"{url.scheme}://{url.netloc}" == BASE
        assert url.path == f"/apps/{session.id}/web/"
        await proxy.sync()
        async with httpx.AsyncClient(base_url=base, follow_redirects=True) as client:
            page = await client.get(f"{url.path}?{url.query}")
    assert page.status_code == 200
    assert page.json()["path"] == "/"


async def test_start_app_refuses_what_cannot_be_opened(bus: Bus, gateway: Gateway) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", 1, False)])

    async def refused(app: str) -> str | None:
        body = await gateway.gql(START, id=session.id, app=app)
        if "errors" not in body:
            return None
        message = body["errors"][0]["message"]
        return str(message) if "(it has" in message else None  # once running and reported

    missing = await eventually(lambda: refused("jupyter"), what="a refusal")
    assert missing == f"session {session.id} has no app 'jupyter' (it has web)"
    nothing = await gateway.gql(START, id="no-such-session", app="web")
    assert nothing["errors"][0]["extensions"]["code"] == "not-found"


async def test_every_running_session_has_a_terminal(bus: Bus, gateway: Gateway) -> None:
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [])  # its image declares no apps

    async def started() -> dict[str, Any] | None:
        body = await gateway.gql(START, id=session.id, app="terminal")
        return body["data"]["startApp"] if "errors" not in body else None

    access = await eventually(started, what="startApp to answer")
    assert urlsplit(access["url"]).path == f"/apps/{session.id}/terminal/"


async def test_an_id_that_is_no_id_is_invalid_input_not_a_crash(gateway: Gateway) -> None:
    huge = "a" * 100_000
    cases: tuple[tuple[str, dict[str, Any]], ...] = (
        (START, {"id": huge, "app": "web"}),
        (START, {"id": "a b\x00", "app": "web"}),
        ("mutation($id: ID!) { terminateSession(id: $id) { status } }", {"id": huge}),
        ("query($id: ID!) { commandOutcome(id: $id) { status } }", {"id": huge}),
    )
    for query, variables in cases:
        body = await gateway.gql(query, **variables)
        (error,) = body["errors"]
        assert error["extensions"]["code"] == "invalid", error
        assert "is not a valid id" in error["message"] and len(error["message"]) < 300, error


REVOKE = "mutation($id: ID!, $app: String) { revokeAppAccess(sessionId: $id, app: $app) }"


async def test_revoke_app_access_voids_the_cookie_a_url_became(bus: Bus, gateway: Gateway) -> None:
    async with fake_app() as port, running_proxy(bus) as (proxy, base):
        session = FakeSession(EventStore(bus))
        await session.start(ALICE, [("web", port, False)])

        async def started() -> dict[str, Any] | None:
            body = await gateway.gql(START, id=session.id, app="web")
            return body["data"]["startApp"] if "errors" not in body else None

        url = urlsplit((await eventually(started, what="startApp to answer"))["url"])
        await proxy.sync()
        async with httpx.AsyncClient(base_url=base) as client:
            opened = await client.get(f"{url.path}?{url.query}")
            assert opened.status_code == 303
            replayed = await client.get(f"{url.path}?{url.query}")
            assert replayed.status_code == 401 and "used already" in replayed.text
            cookie = {"Cookie": f"{COOKIE}={opened.cookies[COOKIE]}"}
            assert (await client.get(url.path, headers=cookie)).status_code == 200

            _, stranger, _ = await person(gateway, "stranger", "default", "default")
            theirs = await gateway.gql(REVOKE, auth=stranger, id=session.id, app="web")
            assert theirs["errors"][0]["extensions"]["code"] == "not-found", theirs
            bad = await gateway.gql(REVOKE, id=session.id, app="NOT AN APP")
            assert bad["errors"][0]["extensions"]["code"] == "invalid", bad
            assert (await client.get(url.path, headers=cookie)).status_code == 200

            revoked = await gateway.gql(REVOKE, id=session.id, app="web")
            assert revoked == {"data": {"revokeAppAccess": True}}

            async def refused() -> bool | None:
                answer = await client.get(url.path, headers=cookie)
                return True if answer.status_code == 401 and "revoked" in answer.text else None

            await eventually(refused, what="the cookie refused after the revocation")
