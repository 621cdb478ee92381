"""The HTTP edge through a real gateway: any body that is not a GraphQL request is a 400 with
a sentence, nothing but ``login`` is answered without credentials (introspection included),
NATS gone is ``unavailable`` at once, and nothing a client sends is a 500 or appends an event.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from events.bus import Bus, connect, ensure_streams
from jetyard.runtime.natsserver import NatsServer
from schemas.settings import NatsSettings
from schemas.subjects import ACCESS_STREAM, COMMANDS_STREAM, EVENTS_STREAM
from tests.integration.gateway_support import Gateway, running_gateway


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("edge"), command_timeout_s=0.5) as gw:
        yield gw


async def last_seqs(bus: Bus) -> tuple[int, int]:
    events = (await bus.js.stream_info(EVENTS_STREAM)).state.last_seq
    commands = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    return events, commands


DEEP = b"[" * 100_000 + b"]" * 100_000
BAD_BODIES: list[tuple[bytes, str]] = [
    (b"null", "the body is a JSON null"),
    (b"42", "the body is a JSON int"),
    (b'"text"', "the body is a JSON str"),
    (b"[]", "the body is a JSON list"),
    (b"", "the body is empty"),
    (b"\xff\xfe{}", "the body is not UTF-8"),
    (b"{not json", "the body is not JSON"),
    (DEEP, "nests deeper than 64 levels"),
    (b'{"query": "{ viewer { email } }", "variables": ' + DEEP + b"}", "nests deeper"),
    (b'{"query": 42}', '"query" must be a string'),
    (b"{}", '"query" must be a string'),
    (b'{"query": "{ viewer { email } }", "variables": [1]}', '"variables" must be a JSON object'),
    (b'{"query": "{ viewer { email } }", "operationName": 7}', '"operationName" must be'),
    (b'{"query": "' + b"a" * (1 << 20) + b'"}', "larger than 1048576 bytes"),
]


@pytest.mark.parametrize(("body", "says"), BAD_BODIES, ids=range(len(BAD_BODIES)))
async def test_a_body_that_is_no_graphql_request_is_a_400_that_says_why(
    gateway: Gateway, bus: Bus, body: bytes, says: str
) -> None:
    before = await last_seqs(bus)
    for auth in (gateway.root, httpx.Auth()):  # signed, and anonymous (a no-op auth)
        started = time.monotonic()
        answer = await gateway.client.post(
            f"{gateway.url}/graphql",
            content=body,
            headers={"content-type": "application/json"},
            auth=auth,
        )
        assert time.monotonic() - started < 10
        assert answer.status_code == 400, answer.text
        error = answer.json()["errors"][0]
        assert error["extensions"]["code"] == "bad-request"
        assert says in error["message"]
    assert await last_seqs(bus) == before


async def test_without_credentials_only_login_is_answered(gateway: Gateway) -> None:
    url = f"{gateway.url}/graphql"
    introspection = await gateway.client.post(
        url, json={"query": "{ __schema { queryType { name } } }"}
    )
    sessions = await gateway.client.post(url, json={"query": "{ sessions { edges { cursor } } }"})
    asyncapi = await gateway.client.get(f"{gateway.url}/asyncapi.json")
    by_get = await gateway.client.get(url, params={"query": "{ __typename }"})
    login = await gateway.client.post(
        url,
        json={
            "query": "mutation($e: String!, $p: String!) { login(email: $e, password: $p) "
            "{ token } }",
            "variables": {"e": "nobody@example.org", "p": "not-a-password"},
        },
    )
    for refused in (introspection, sessions, asyncapi, by_get):
        assert refused.status_code == 401, refused.text
        assert refused.json()["errors"][0]["extensions"]["code"] == "unauthenticated"
    # login itself is answered (here: wrong credentials, as a GraphQL error, not a 401)
    assert login.status_code == 200
    assert login.json()["errors"][0]["message"]
    signed = await gateway.client.post(
        url, json={"query": "{ __schema { queryType { name } } }"}, auth=gateway.root
    )
    assert signed.json()["data"]["__schema"]["queryType"]["name"] == "Query"


async def test_refused_requests_reach_the_access_log(gateway: Gateway, bus: Bus) -> None:
    before = (await bus.js.stream_info(ACCESS_STREAM)).state.last_seq
    await gateway.client.post(f"{gateway.url}/graphql", content=b"42")
    await gateway.client.post(
        f"{gateway.url}/graphql", json={"query": "{ sessions { edges { cursor } } }"}
    )
    after = before
    for _ in range(100):  # recorded after the answer is sent
        after = (await bus.js.stream_info(ACCESS_STREAM)).state.last_seq
        if after - before >= 2:
            break
        await asyncio.sleep(0.05)
    assert after - before >= 2


async def test_a_list_without_first_costs_its_default_page(gateway: Gateway) -> None:
    # sessions (a page of 50) x each one's history (a list: 50) x 9 fields: about 22,600,
    # over the limit of 20,000; the same with first: 5 on the history is cheap.
    fields = " ".join(
        f"{a}{i}: {f}"
        for i in range(3)
        for a, f in zip("abc", ("status", "reason", "at"), strict=True)
    )
    costly = await gateway.gql(
        f"{{ sessions {{ edges {{ node {{ history {{ {fields} }} }} }} }} }}"
    )
    assert "would cost about" in costly["errors"][0]["message"]
    cheap = await gateway.gql(
        f"{{ sessions(first: 5) {{ edges {{ node {{ history {{ {fields} }} }} }} }} }}"
    )
    assert "errors" not in cheap, cheap


async def test_nats_gone_is_unavailable_at_once_never_a_500(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    server = NatsServer(data_dir=tmp_path / "nats").start()
    own = await connect(NatsSettings(url=server.url, request_timeout_s=2.0), name="edge-nats")
    try:
        await ensure_streams(own)
        async with running_gateway(own, tmp_path_factory.mktemp("edge-down")) as gw:
            ok = await gw.gql("{ viewer { role } }")
            assert ok.get("data") is not None, ok
            server.kill()
            for _ in range(3):
                started = time.monotonic()
                answer = await gw.client.post(
                    f"{gw.url}/graphql",
                    json={"query": "{ sessions { edges { cursor } } }"},
                    auth=gw.root,
                    timeout=httpx.Timeout(15.0),
                )
                elapsed = time.monotonic() - started
                assert answer.status_code in (200, 503), answer.text
                assert answer.json()["errors"][0]["extensions"]["code"] == "unavailable"
                assert elapsed < 6.0
            server.start()  # same port and store: the connection comes back by itself
            for _ in range(100):
                if own.nc.is_connected:
                    break
                await asyncio.sleep(0.1)
            again = await gw.gql("{ viewer { role } }")
            assert again.get("data") is not None, again
    finally:
        server.stop()
        await own.close()


async def test_the_request_that_broke_an_installation_is_refused_and_stores_nothing(
    gateway: Gateway, bus: Bus
) -> None:
    # A signed-in user's createSession with cpu "1e400" was accepted, and its event then
    # stopped the projections for good. Each of these is now a coded error and nothing moves.
    mutation = (
        "mutation($input: CreateSessionInput!) { createSession(input: $input) "
        "{ status sessionId message } }"
    )
    base = {"image": "jetyard-busybox:latest", "type": "batch", "command": ["true"]}
    before = await last_seqs(bus)
    for bad in (
        {"cpu": "1e400", "memory": "64m"},
        {"cpu": "99999999999999999999"},
        {"gpu": "1e400"},
        {"memory": "99999999999999999999t"},
        {"cpu": "NaN"},
        {"env": [{"name": "A", "value": "x\x00"}]},
        {"dependsOn": ["no-such-session"]},
    ):
        answer = await gateway.gql(mutation, input={**base, **bad})
        error = answer["errors"][0]
        assert error["extensions"]["code"] in {"invalid", "not-found"}, (bad, error)
        assert "InvalidOperation" not in error["message"]
    assert await last_seqs(bus) == before


async def test_graphiql_is_served_from_the_gateway_itself(gateway: Gateway) -> None:
    page = await gateway.client.get(f"{gateway.url}/graphql", headers={"accept": "text/html"})
    assert page.status_code == 200
    assert "graphiql" in page.text.lower()
    sources = re.findall(r"""(?:src|href)="([^"]+)\"""", page.text)
    assets = [s for s in sources if not s.startswith("data:")]
    assert len(assets) == 7
    assert all(s.startswith("/graphiql-assets/") for s in assets), assets  # nothing external
    integrity = dict(
        re.findall(r'(?:src|href)="(/graphiql-assets/[^"]+)"\s+integrity="([^"]+)"', page.text)
    )
    for path in assets:
        served = await gateway.client.get(f"{gateway.url}{path}")
        assert served.status_code == 200, path
        assert "max-age=31536000" in served.headers["cache-control"]
        digest = base64.b64encode(hashlib.sha384(served.content).digest()).decode()
        assert integrity[path] == f"sha384-{digest}"  # the browser's check holds
