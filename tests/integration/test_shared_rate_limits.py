"""Rate limits hold across gateway replicas (buckets shared on NATS) and count operations sent
over a WebSocket, through real gateways."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats.js.errors
import pytest
import uvicorn
import websockets
from cryptography.fernet import Fernet

from events.bus import Bus
from jetyard.runtime.natsserver import free_port
from projections.db import create_engine
from schemas.subjects import RATELIMITS_BUCKET
from services.gateway.app import open_services
from services.gateway.auth.ratelimit_shared import SharedRateLimiter
from services.gateway.core.views import SqlViews
from services.gateway.http import build_app
from services.gateway.settings import GatewaySettings
from tests.integration.gateway_support import running_gateway

LOGIN = {
    "query": "mutation($e: String!, $p: String!) { login(email: $e, password: $p) { token } }",
    "variables": {"e": "nobody@example.org", "p": "wrong-password"},
}


async def _forget(bus: Bus, key: str) -> None:
    kv = await bus.js.key_value(RATELIMITS_BUCKET)
    with contextlib.suppress(nats.js.errors.KeyNotFoundError):
        await kv.purge(key)


@contextlib.asynccontextmanager
async def second_replica(bus: Bus, tmp_path: Path, **settings: Any) -> AsyncIterator[str]:
    """Another gateway process's app on the same NATS (its own views database; the tenancy
    service and projector the first one runs are the cluster's, not per replica)."""
    key = Fernet.generate_key().decode()
    config = GatewaySettings(secrets_key=key, **settings)
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'replica.db'}")
    try:
        async with open_services(bus, config, SqlViews(engine)) as services:
            port = free_port()
            server = uvicorn.Server(
                uvicorn.Config(build_app(services), port=port, lifespan="off", log_level="warning")
            )
            serving = asyncio.create_task(server.serve())
            while not server.started:  # noqa: ASYNC110 (uvicorn exposes no start event)
                await asyncio.sleep(0.02)
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                server.should_exit = True
                await serving
    finally:
        await engine.dispose()


async def test_two_replicas_share_one_limit(bus: Bus, tmp_path: Path) -> None:
    await _forget(bus, "anon_127_0_0_1")  # this test's own bucket, full
    async with (
        running_gateway(bus, tmp_path / "a", anonymous_rate_limit=4) as a,
        second_replica(bus, tmp_path, anonymous_rate_limit=4) as b_url,
    ):
        statuses = []
        for url in (a.url, b_url, a.url, b_url, a.url, b_url):
            answer = await a.client.post(f"{url}/graphql", json=LOGIN)
            statuses.append(answer.status_code)
        # Four between them, not four each: the fifth and sixth are refused.
        assert statuses == [200, 200, 200, 200, 429, 429], statuses
    await _forget(bus, "anon_127_0_0_1")


async def test_operations_over_a_websocket_count_against_the_limit(
    bus: Bus, tmp_path: Path
) -> None:
    async with running_gateway(bus, tmp_path / "ws", rate_limit=3) as gateway:
        await _forget(bus, gateway.admin.access_key)
        url = gateway.url.replace("http", "ws") + "/graphql"
        codes: list[str | None] = []
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            init = {
                "type": "connection_init",
                "payload": gateway.root.connection_params(gateway.host),
            }
            await ws.send(json.dumps(init))
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            for n in range(5):
                payload = {"query": "{ viewer { role } }"}
                await ws.send(json.dumps({"id": str(n), "type": "subscribe", "payload": payload}))
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                    if message["type"] == "next":
                        errors = message["payload"].get("errors") or []
                        codes.append(errors[0]["extensions"]["code"] if errors else None)
                    elif message["type"] == "error":
                        codes.append(message["payload"][0]["extensions"]["code"])
                        break
                    if message["type"] == "complete":
                        break
        assert codes[:3] == [None, None, None]
        assert codes[3:] == ["rate-limited", "rate-limited"]
        await _forget(bus, gateway.admin.access_key)


async def test_a_burst_in_one_process_is_queued_not_raced(bus: Bus) -> None:
    limiter = await SharedRateLimiter.open(bus)
    key = "burst-test-key"
    await _forget(bus, key)
    decisions = await asyncio.gather(*(limiter.take(key, 10) for _ in range(30)))
    # One process's takes of a key wait for each other: exactly the ten tokens, none lost to
    # a compare-and-set race with itself.
    assert [d.allowed for d in decisions].count(True) == 10
    assert not limiter._queues  # nothing left behind once the burst is over
    await _forget(bus, key)


async def test_a_bucket_that_replicas_race_for_still_decides(bus: Bus) -> None:
    replicas = [await SharedRateLimiter.open(bus) for _ in range(3)]
    key = "race-test-key"
    await _forget(bus, key)
    decisions = await asyncio.gather(*(r.take(key, 10) for _ in range(10) for r in replicas))
    allowed = sum(d.allowed for d in decisions)
    # Compare-and-set: never more than the ten tokens (one that lost every race is refused).
    assert 1 <= allowed <= 10
    await _forget(bus, key)


@pytest.mark.parametrize("limit", [1, 2])
async def test_the_shared_bucket_refills_at_its_rate(bus: Bus, limit: int) -> None:
    now = [1_000.0]
    kv = await bus.js.key_value(RATELIMITS_BUCKET)
    limiter = SharedRateLimiter(kv, clock=lambda: now[0])
    key = f"refill-test-{limit}"
    await _forget(bus, key)
    assert all([(await limiter.take(key, limit)).allowed for _ in range(limit)])
    assert not (await limiter.take(key, limit)).allowed
    now[0] += 60.0 / limit  # one token's worth of time
    assert (await limiter.take(key, limit)).allowed
    await _forget(bus, key)
