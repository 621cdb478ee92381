"""Model-serving endpoints through the app proxy on the real nats-server, with real HTTP
replicas on 127.0.0.1 and the endpoint's, sessions' and agents' events written to the log as
the serving controller, the scheduler and the agents write them: tokens required, refused and
revoked (a revocation refused by two proxy replicas within a second of its write), an endpoint
open to the public, least outstanding requests over two replicas (even spread, a slow one
avoided), a replica that refuses connections skipped with no client error, server-sent events
passed chunk by chunk, held requests answered once a replica is healthy, one wake for an
endpoint scaled to zero, 410 after a destroy, and the load reports and metrics counting what
went through."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from nats.aio.msg import Msg

from commands.serving.messages import WakeEndpoint
from events.bus import Bus
from events.domain.serving import (
    EndpointDestroyed,
    EndpointDestroyRequested,
    EndpointModified,
    EndpointScaled,
    EndpointTokenRevoked,
    ReplicaRetired,
)
from events.store import EventStore
from schemas.serving import Rollout, ScaleSource, Scaling
from schemas.subjects import AggregateType, command_subject
from services.appproxy.endpoints.load_reports import subject as load_subject
from services.appproxy.service import AppProxyService
from tests.integration.appproxy_support import free_ports
from tests.integration.endpoint_support import (
    EndpointLog,
    ModelReplica,
    endpoint_proxy,
    replica_server,
)
from tests.metrics_support import Scraped


@pytest.fixture
async def proxy(bus: Bus) -> AsyncIterator[tuple[AppProxyService, httpx.AsyncClient]]:
    async with (
        endpoint_proxy(bus) as (service, base),
        httpx.AsyncClient(base_url=base, timeout=30) as client,
    ):
        yield service, client


@contextlib.asynccontextmanager
async def heard(bus: Bus, subject: str) -> AsyncIterator[list[dict[str, Any]]]:
    """What is published on ``subject`` (core NATS) during the block, as JSON."""
    got: list[dict[str, Any]] = []

    async def take(message: Msg) -> None:
        got.append(json.loads(message.data))

    subscription = await bus.nc.subscribe(subject, cb=take)
    try:
        yield got
    finally:
        await subscription.unsubscribe()


Proxy = tuple[AppProxyService, httpx.AsyncClient]


async def started(bus: Bus, port: int, **create: Any) -> EndpointLog:
    """An endpoint with one replica serving at ``port``."""
    log = EndpointLog(EventStore(bus))
    await log.create(**create)
    await log.serving_replica(1, port)
    return log


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_token_is_needed_and_never_reaches_the_replica(bus: Bus, proxy: Proxy) -> None:
    service, client = proxy
    replica = ModelReplica("a")
    async with replica_server(replica) as port:
        log = await started(bus, port)
        _, good = await log.token()
        await service.sync()
        url = f"/e/{log.name}/v1/completions?model=x&token=t"

        missing = await client.post(url, content=b"{}")
        assert missing.status_code == 401
        assert f"endpoint {log.name} needs a token" in missing.text
        assert missing.headers["www-authenticate"].startswith("Bearer")
        wrong = await client.post(url, content=b"{}", headers=auth(good[:-1] + "x"))
        assert wrong.status_code == 401 and "is not one of endpoint" in wrong.text
        assert replica.seen == []

        answer = await client.post(url, content=b'{"prompt": "hi"}', headers=auth(good))
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "replica": "a", "path": "/v1/completions", "query": "model=x&token=t",
            "authorization": None, "prefix": f"/e/{log.name}", "body": '{"prompt": "hi"}',
        }  # fmt: skip
        bare = await client.get(f"/e/{log.name}", headers=auth(good))
        assert bare.json()["path"] == "/"


async def test_a_revoked_token_is_refused_by_every_proxy_within_a_second_of_its_revocation(
    bus: Bus, proxy: Proxy
) -> None:
    service, client = proxy
    async with (
        replica_server(ModelReplica("a")) as port,
        endpoint_proxy(bus) as (second, second_base),
        httpx.AsyncClient(base_url=second_base) as second_client,
    ):
        log = await started(bus, port)
        token_id, token = await log.token()
        _, other = await log.token()
        await service.sync()
        await second.sync()
        url = f"/e/{log.name}/v1/embeddings"
        clients = [client, second_client]
        for each in clients:
            assert (await each.get(url, headers=auth(token))).status_code == 200

        await log.write(EndpointTokenRevoked(token_id=token_id, reason="leaked"))
        revoked_at = time.monotonic()

        async def refused(by: httpx.AsyncClient) -> float:
            while (answer := await by.get(url, headers=auth(token))).status_code == 200:
                assert time.monotonic() - revoked_at < 1.0, "still let in a second after revoking"
                await asyncio.sleep(0.01)
            assert answer.status_code == 401 and f"token {token_id} was revoked" in answer.text
            return time.monotonic() - revoked_at

        took = await asyncio.gather(*(refused(each) for each in clients))
        assert max(took) < 1.0
        print("revocation refused by both proxies", [f"{t * 1000:.0f} ms" for t in took])
        # Another token of the endpoint still passes.
        for each in clients:
            assert (await each.get(url, headers=auth(other))).status_code == 200


async def test_an_expired_token_is_refused_saying_so(bus: Bus, proxy: Proxy) -> None:
    service, client = proxy
    async with replica_server(ModelReplica("a")) as port:
        log = await started(bus, port)
        token_id, token = await log.token(expires_in=timedelta(seconds=-1))
        await service.sync()
        answer = await client.get(f"/e/{log.name}/", headers=auth(token))
        assert answer.status_code == 401 and f"token {token_id} expired at" in answer.text


async def test_an_endpoint_open_to_the_public_needs_no_token_until_it_is_closed(
    bus: Bus, proxy: Proxy
) -> None:
    service, client = proxy
    async with replica_server(ModelReplica("a")) as port:
        log = await started(bus, port, public=True)
        await service.sync()
        assert (await client.get(f"/e/{log.name}/v1/models")).status_code == 200
        await log.write(EndpointModified(scaling=Scaling(min_replicas=0, max_replicas=4),
                                         rollout=Rollout(), open_to_public=False))  # fmt: skip
        await service.sync()
        assert (await client.get(f"/e/{log.name}/v1/models")).status_code == 401


async def test_requests_spread_evenly_over_two_replicas_and_avoid_a_slow_one(
    bus: Bus, proxy: Proxy
) -> None:
    service, client = proxy
    fast, slow = ModelReplica("fast", delay_s=0.01), ModelReplica("slow", delay_s=0.01)
    async with replica_server(fast) as fast_port, replica_server(slow) as slow_port:
        log = EndpointLog(EventStore(bus))
        await log.create(2, public=True)
        await log.serving_replica(1, fast_port)
        await log.serving_replica(2, slow_port)
        await service.sync()
        url = f"/e/{log.name}/v1/work"

        one_by_one = [(await client.get(url)).json()["replica"] for _ in range(10)]
        assert Counter(one_by_one) == {"fast": 5, "slow": 5}

        # Four clients, each sending its next request when its last is answered: the slow
        # replica holds its requests 30 times longer, so it is chosen far less often.
        slow.delay_s = 0.3

        async def client_loop() -> list[str]:
            return [(await client.get(url)).json()["replica"] for _ in range(10)]

        answered = Counter(r for rs in await asyncio.gather(*(client_loop() for _ in range(4)))
                           for r in rs)  # fmt: skip
        assert answered["fast"] + answered["slow"] == 40
        print(f"of 40 requests, the slow replica took {answered['slow']}")
        assert answered["slow"] <= 10, answered  # a quarter; round-robin would send it 20


async def test_a_replica_that_refuses_connections_is_skipped_with_no_client_error(
    bus: Bus, proxy: Proxy
) -> None:
    service, client = proxy
    live = ModelReplica("live")
    (closed_port,) = free_ports(1)  # nothing listens there
    async with replica_server(live) as port:
        log = EndpointLog(EventStore(bus))
        await log.create(2, public=True)
        await log.serving_replica(1, closed_port)
        await log.serving_replica(2, port)
        await service.sync()
        answers = [await client.get(f"/e/{log.name}/v1/x") for _ in range(10)]
        assert [a.status_code for a in answers] == [200] * 10
        assert {a.json()["replica"] for a in answers} == {"live"}
        assert len(live.seen) == 10
        # With that one alone left, the client hears why.
        await log.write(EndpointScaled(replicas=1, previous=2, source=ScaleSource.MANUAL,
                                       reason="scaled in"))  # fmt: skip
        await log.write(ReplicaRetired(replica=2, reason="scaled in"))
        await service.sync()
        alone = await client.get(f"/e/{log.name}/v1/x")
        assert alone.status_code == 502
        assert f"no replica of endpoint {log.name} could be reached" in alone.text


async def test_server_sent_events_pass_through_one_by_one(bus: Bus, proxy: Proxy) -> None:
    service, client = proxy
    replica = ModelReplica("a")
    async with replica_server(replica) as port:
        log = await started(bus, port, public=True)
        await service.sync()
        async with client.stream("GET", f"/e/{log.name}/v1/stream") as answer:
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            lines = answer.aiter_lines()
            for n in range(3):
                # The replica sends its next event only now: a proxy that buffered the
                # stream would leave this waiting.
                replica.steps.put_nowait(None)
                line = await asyncio.wait_for(anext(lines), 5)
                assert line == f"data: a {n}"
                assert await asyncio.wait_for(anext(lines), 5) == ""


async def test_a_request_is_held_until_a_replica_becomes_healthy(bus: Bus, proxy: Proxy) -> None:
    service, client = proxy
    async with replica_server(ModelReplica("a")) as port:
        log = EndpointLog(EventStore(bus))
        await log.create(1, public=True)
        await log.request_replica(1, port)  # provisioning: not probed yet
        await service.sync()
        held = asyncio.create_task(client.get(f"/e/{log.name}/v1/x"))
        await asyncio.sleep(0.5)
        assert not held.done()
        await log.healthy(1)
        healthy_at = time.monotonic()
        answer = await asyncio.wait_for(held, 5)
        assert answer.status_code == 200 and answer.json()["replica"] == "a"
        assert time.monotonic() - healthy_at < 1.0


async def test_an_endpoint_scaled_to_zero_is_woken_once_and_answers_when_a_replica_serves(
    bus: Bus, proxy: Proxy
) -> None:
    service, client = proxy
    wake_subject = command_subject(AggregateType.ENDPOINT, "wake")
    async with heard(bus, wake_subject) as wakes, replica_server(ModelReplica("a")) as port:
        log = EndpointLog(EventStore(bus))
        await log.create(0, public=True)
        await service.sync()
        held = [asyncio.create_task(client.get(f"/e/{log.name}/v1/x")) for _ in range(5)]
        await asyncio.sleep(1.0)
        mine = [w for w in wakes if w["endpoint_id"] == log.id]
        assert len(mine) == 1, mine  # five held requests, one wake
        wake = WakeEndpoint.model_validate(mine[0])
        assert wake.actor.id == "appproxy" and wake.tenant.domain == "default"
        assert not any(task.done() for task in held)

        # The controller's answer to the wake.
        await log.write(EndpointScaled(replicas=1, previous=0, source=ScaleSource.WAKE,
                                           reason="a request arrived"))  # fmt: skip
        await log.serving_replica(1, port)
        answers = await asyncio.wait_for(asyncio.gather(*held), 5)
        assert [a.status_code for a in answers] == [200] * 5
        assert len([w for w in wakes if w["endpoint_id"] == log.id]) == 1


async def test_no_replica_within_the_cold_start_timeout_is_a_503_saying_so(
    bus: Bus, proxy: Proxy
) -> None:
    service, client = proxy
    log = EndpointLog(EventStore(bus))
    await log.create(0, public=True, cold_start_s=1)
    await service.sync()
    began = time.monotonic()
    answer = await client.get(f"/e/{log.name}/v1/x")
    assert answer.status_code == 503
    assert f"endpoint {log.name} is scaled to zero: it was woken" in answer.text
    assert 1.0 <= time.monotonic() - began < 3.0


async def test_unknown_is_404_and_a_destroyed_endpoint_410(bus: Bus, proxy: Proxy) -> None:
    service, client = proxy
    async with replica_server(ModelReplica("a")) as port:
        log = await started(bus, port, public=True)
        await service.sync()
        assert (await client.get(f"/e/{log.name}/")).status_code == 200
        unknown = await client.get("/e/no-such-endpoint/")
        assert unknown.status_code == 404 and "no endpoint named" in unknown.text
        await log.write(EndpointDestroyRequested(reason="bye"))
        await service.sync()
        destroying = await client.get(f"/e/{log.name}/")
        assert destroying.status_code == 410
        assert f"endpoint {log.name} is being destroyed" in destroying.text
        await log.write(EndpointDestroyed())
        await service.sync()
        gone = await client.get(f"/e/{log.name}/")
        assert gone.status_code == 410 and f"endpoint {log.name} was destroyed" in gone.text


async def test_load_reports_and_metrics_count_what_went_through(bus: Bus, proxy: Proxy) -> None:
    service, client = proxy
    reported = load_subject(service.settings.reporter_id())
    async with heard(bus, reported) as reports, replica_server(ModelReplica("a")) as port:
        log = await started(bus, port)
        _, token = await log.token()
        await service.sync()
        for _ in range(3):
            assert (await client.get(f"/e/{log.name}/", headers=auth(token))).is_success
        assert (await client.get(f"/e/{log.name}/")).status_code == 401
        sent_at = time.time()
        while not any(r["at"] > sent_at for r in reports):
            await asyncio.sleep(0.05)
            assert time.time() - sent_at < 3, "no load report within 3 s"
        latest = reports[-1]
        assert latest["proxy"] == service.settings.reporter_id()
        counted = latest["endpoints"][log.id]
        assert sum(counted.pop("latency_ms")) == 3  # answered: the refused one is not let in
        assert counted == {
                "requests": 3, "inflight": 0,
                "replicas": {"1": {"requests": 3, "inflight": 0}},
            }  # fmt: skip
        # Every second.
        gaps = [b["at"] - a["at"] for a, b in itertools.pairwise(reports)]
        assert all(0.5 < gap < 2.0 for gap in gaps), gaps

        page = Scraped((await client.get("/metrics")).text)
        assert page.get("jetyard_endpoint_requests_total", endpoint=log.name, code="2xx") == 3
        assert page.get("jetyard_endpoint_requests_total", endpoint=log.name, code="4xx") == 1
        assert page.get("jetyard_endpoint_request_duration_seconds_count",
                            endpoint=log.name) == 4  # fmt: skip
        assert page.get("jetyard_endpoint_inflight", endpoint=log.name) == 0
        assert page.get("jetyard_endpoint_replicas_serving", endpoint=log.name) == 1
