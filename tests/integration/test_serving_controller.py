"""The serving controller on a real nats-server with the real scheduler: an endpoint's replicas
are asked for as inference sessions, placed, probed over real HTTP, become HEALTHY; a replica
that fails its probes is retired and replaced, one whose container dies is replaced; a revision
that never becomes healthy ends its replicas with the probe's answer and rolls back; a load
report scales the endpoint; a wake lifts it from zero; tokens are revoked; a destroy ends every
replica and then the endpoint. The machine's agent is written by hand (``serving_support``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TypeVar

import httpx
import pytest

from commands.bus import CommandBus
from commands.messages import Command
from commands.repository import load
from commands.serving.messages import (
    CreateEndpoint,
    CreateEndpointToken,
    DestroyEndpoint,
    RevokeEndpointToken,
    ScaleEndpoint,
    UpdateEndpoint,
    WakeEndpoint,
)
from commands.session.aggregate import Session
from events.bus import Bus
from events.catalogue import Event
from events.domain.serving import (
    EndpointDestroyed,
    EndpointRolledBack,
    EndpointRolloutFinished,
    EndpointScaled,
    EndpointTokenRevoked,
    ReplicaEnded,
    ReplicaHealthChanged,
    ReplicaRequested,
    ReplicaRetired,
)
from events.store import EventStore
from schemas.ids import new_id, session_id_for
from schemas.principal import Actor, Tenant
from schemas.resources import ResourceSlots
from schemas.serving import (
    EndpointStatus,
    HealthCheck,
    ReplicaHealth,
    Revision,
    Rollout,
    ScaleSource,
    Scaling,
    ScalingMetric,
    ScalingRule,
    endpoint_id_for,
    replica_command_id,
)
from schemas.session import SessionStatus, SessionType
from schemas.subjects import SERVING_LOAD_PREFIX
from schemas.tenancy import SessionOwner
from services.serving.probes import probe_once
from services.serving.rules.health import Probe
from tests.integration.conftest import StartScheduler
from tests.integration.scheduler_support import eventually
from tests.integration.serving_support import (
    BROKEN,
    controller,
    events_of,
    machine,
    serve,
    wait_for,
)
from tests.tenancy_support import make_tenancy

FAST = HealthCheck(interval_s=0.2, timeout_s=1, failures=2, warmup_s=2, replace_after_s=0.5)
NEED = ResourceSlots(cpu_milli=500, memory_bytes=64 << 20)
PERSON = Actor.service("tests")


def revision(image: str, tag: str = "1") -> Revision:
    return Revision(image=f"{image}:{tag}", port=8000, resources=NEED, health=FAST,
                    command=("serve", "{model_path}"))  # fmt: skip


def create(name: str, owner: SessionOwner, spec: Revision, **fields: object) -> CreateEndpoint:
    return CreateEndpoint.model_validate({
        "actor": PERSON, "tenant": Tenant(domain=owner.domain, project=owner.project_id),
        "name": name, "owner": owner, "spec": spec, **fields,
    })  # fmt: skip


C = TypeVar("C", bound=Command)


def on(kind: type[C], owner: SessionOwner, endpoint_id: str, **fields: object) -> C:
    """A command on the endpoint, as the gateway sends it for a person."""
    tenant = Tenant(domain=owner.domain, project=owner.project_id)
    return kind.model_validate(
        {"actor": PERSON, "tenant": tenant, "endpoint_id": endpoint_id, **fields}
    )


Fresh = tuple[SessionOwner, str, str]
"""A new tenancy's owner, a new endpoint name and its id (with the scheduler started)."""


@pytest.fixture
async def fresh(store: EventStore, start_scheduler: StartScheduler) -> Fresh:
    owner = (await make_tenancy(store)).owner
    await start_scheduler()
    name = f"ep-{new_id()[:8]}"
    return owner, name, endpoint_id_for(name)


async def accepted(bus: Bus, cmd: Command) -> None:
    outcome = await CommandBus(bus).execute(cmd, timeout=10)
    assert outcome is not None and outcome.accepted, outcome


def healthy(e: ReplicaHealthChanged) -> bool:
    return e.health is ReplicaHealth.HEALTHY


async def test_replicas_are_asked_for_turn_healthy_and_a_destroy_ends_them(
    bus: Bus, store: EventStore, image: str, fresh: Fresh
) -> None:
    owner, name, endpoint_id = fresh
    async with controller(bus) as service, machine(store, image, service):
        made = create(name, owner, revision(image), replicas=2,
                      scaling=Scaling(min_replicas=1, max_replicas=3))  # fmt: skip
        await accepted(bus, made)
        asked = await wait_for(store, endpoint_id, ReplicaRequested, 2)
        assert [e.replica for e in asked] == [1, 2]
        # Each replica is an inference session the scheduler created as the endpoint's owner,
        # its id from the endpoint, the command that made it and the replica's number.
        session_id = session_id_for(replica_command_id(endpoint_id, made.command_id, 1))
        assert asked[0].session_id == session_id
        # (The session is written once the scheduler took the create the request led to.)

        async def created() -> Session | None:
            return (await load(store, Session, session_id)).aggregate

        session = await eventually(created, timeout=10, what=f"session {session_id}")
        assert session.owner == owner
        spec = session.spec
        assert (spec.type, spec.service_port, spec.command) == (
            SessionType.INFERENCE, 8000, ("serve", "/models"),
        )  # fmt: skip
        assert spec.env["JETYARD_MODEL_PATH"] == "/models"
        up = await wait_for(store, endpoint_id, ReplicaHealthChanged, 2, healthy)
        assert {e.reason for e in up} == {"GET /health: 200"}

        async def ready() -> bool:
            found = service.endpoint(endpoint_id)
            return found is not None and found.status() is EndpointStatus.READY

        await eventually(ready, 10, "the endpoint is READY")

        # Tokens: issued, revoked; revoked again changes nothing.
        token = on(CreateEndpointToken, owner, endpoint_id, token_id="tok1",
                   secret_sha256="ab" * 32)  # fmt: skip
        await accepted(bus, token)
        revoke = on(RevokeEndpointToken, owner, endpoint_id, token_id="tok1", reason="leaked")
        await accepted(bus, revoke)
        await accepted(bus, revoke.model_copy(update={"command_id": new_id()}))
        assert len(await wait_for(store, endpoint_id, EndpointTokenRevoked)) == 1
        found = service.endpoint(endpoint_id)
        assert found is not None and not found.token_valid("tok1", "ab" * 32, found.modified_on)

        await accepted(bus, on(DestroyEndpoint, owner, endpoint_id))
        await wait_for(store, endpoint_id, EndpointDestroyed)
        for replica in asked:
            ended = (await load(store, Session, replica.session_id)).aggregate
            assert ended is not None and ended.status is SessionStatus.TERMINATED


async def test_a_failing_replica_is_retired_and_replaced_and_a_dead_one_is_replaced(
    bus: Bus, store: EventStore, image: str, fresh: Fresh
) -> None:
    owner, name, endpoint_id = fresh
    async with controller(bus) as service, machine(store, image, service) as node:
        await accepted(bus, create(name, owner, revision(image), replicas=2,
                                   scaling=Scaling(min_replicas=1, max_replicas=3)))  # fmt: skip
        first, second = await wait_for(store, endpoint_id, ReplicaRequested, 2)
        await wait_for(store, endpoint_id, ReplicaHealthChanged, 2, healthy)
        started = time.monotonic()
        node.replicas[first.session_id].health = 500  # the model breaks
        down = await wait_for(store, endpoint_id, ReplicaHealthChanged, 1,
                              lambda e: e.health is ReplicaHealth.UNHEALTHY)  # fmt: skip
        assert "2 probes failed in a row: GET /health: 500 Internal Server Error" in down[0].reason
        retired = await wait_for(store, endpoint_id, ReplicaRetired)
        assert retired[0].replica == first.replica and "unhealthy for" in retired[0].reason
        # Out of rotation at once; replaced after replace_after_s (0.5 s) of being unhealthy.
        assert time.monotonic() - started < 5
        third = (await wait_for(store, endpoint_id, ReplicaRequested, 3))[2]
        await wait_for(store, endpoint_id, ReplicaHealthChanged, 1,
                       lambda e: healthy(e) and e.replica == third.replica)  # fmt: skip

        # A replica whose container dies (its session ends) is replaced.
        await node.kill(second.session_id)
        ended = await wait_for(store, endpoint_id, ReplicaEnded, 1,
                               lambda e: e.replica == second.replica)  # fmt: skip
        assert not ended[0].failed and ended[0].reason.startswith("its session ended")
        fourth = (await wait_for(store, endpoint_id, ReplicaRequested, 4))[3]
        await wait_for(store, endpoint_id, ReplicaHealthChanged, 1,
                       lambda e: healthy(e) and e.replica == fourth.replica)  # fmt: skip
        await accepted(bus, on(DestroyEndpoint, owner, endpoint_id))
        await wait_for(store, endpoint_id, EndpointDestroyed)


async def test_a_never_healthy_revision_fails_with_the_probes_answer_and_rolls_back(
    bus: Bus, store: EventStore, image: str, fresh: Fresh
) -> None:
    owner, name, endpoint_id = fresh
    async with controller(bus) as service, machine(store, image, service):
        await accepted(bus, create(name, owner, revision(image), replicas=1,
                                   rollout=Rollout(max_surge=1, failed_replicas=2)))  # fmt: skip
        (first,) = await wait_for(store, endpoint_id, ReplicaRequested)
        await wait_for(store, endpoint_id, ReplicaHealthChanged, 1, healthy)
        await accepted(bus, on(UpdateEndpoint, owner, endpoint_id, spec=revision(image, BROKEN)))
        failed = await wait_for(store, endpoint_id, ReplicaEnded, 2, lambda e: e.failed)
        for ended in failed:
            assert "never healthy within its 2s warm-up" in ended.reason
            assert "GET /health: 503 Service Unavailable: model failed to load" in ended.reason
        (back,) = await wait_for(store, endpoint_id, EndpointRolledBack)
        assert (back.revision, back.to_revision) == (2, 1)
        assert "503 Service Unavailable: model failed to load" in back.reason
        found = service.endpoint(endpoint_id)
        assert found is not None and found.current_revision == found.target_revision == 1
        # The old replica served throughout: never retired.
        assert found.replicas[first.replica].serving
        retired = await events_of(store, endpoint_id, ReplicaRetired)
        assert first.replica not in {e.replica for e in retired}
        await accepted(bus, on(DestroyEndpoint, owner, endpoint_id))
        await wait_for(store, endpoint_id, EndpointDestroyed)


async def test_a_wake_lifts_an_endpoint_from_zero_and_a_load_report_scales_it(
    bus: Bus, store: EventStore, image: str, fresh: Fresh
) -> None:
    owner, name, endpoint_id = fresh
    rule = ScalingRule(metric=ScalingMetric.RPS, scale_up_above=5, step=2, cooldown_s=60,
                       window_s=2)  # fmt: skip
    scaling = Scaling(min_replicas=0, max_replicas=2, rules=(rule,))
    async with controller(bus) as service, machine(store, image, service):
        await accepted(bus, create(name, owner, revision(image), replicas=0, scaling=scaling))
        wake = WakeEndpoint(actor=Actor.service("appproxy"), tenant=Tenant(domain=owner.domain),
                            endpoint_id=endpoint_id)  # fmt: skip
        await accepted(bus, wake)
        await accepted(bus, wake.model_copy(update={"command_id": new_id()}))  # no change
        (woken,) = await wait_for(store, endpoint_id, EndpointScaled)
        assert (woken.source, woken.replicas, woken.previous) == (ScaleSource.WAKE, 1, 0)
        await wait_for(store, endpoint_id, ReplicaHealthChanged, 1, healthy)

        # One proxy reports 20 requests a second to the endpoint: rule 0 steps up, clamped to 2.
        proxy = f"proxy-{new_id()[:8]}"
        start = time.time()
        for tick in range(40):
            report = {"proxy": proxy, "at": start + tick * 0.1, "endpoints": {
                endpoint_id: {"requests": tick * 2, "inflight": 1, "replicas": {}}}}  # fmt: skip
            await bus.nc.publish(f"{SERVING_LOAD_PREFIX}.{proxy}", json.dumps(report).encode())
            if await _scaled_by_rule(store, endpoint_id):
                break
            await asyncio.sleep(0.1)
        scaled = await wait_for(store, endpoint_id, EndpointScaled, 1,
                                lambda e: e.source is ScaleSource.RULE)  # fmt: skip
        assert (scaled[0].replicas, scaled[0].rule, scaled[0].metric) == (2, 0, ScalingMetric.RPS)
        assert scaled[0].value is not None and scaled[0].value > 5
        assert "clamped from 3" in scaled[0].reason
        await wait_for(store, endpoint_id, ReplicaRequested, 2)
        await accepted(bus, on(DestroyEndpoint, owner, endpoint_id))
        await wait_for(store, endpoint_id, EndpointDestroyed)


async def _scaled_by_rule(store: EventStore, endpoint_id: str) -> bool:
    found = await events_of(store, endpoint_id, EndpointScaled)
    return any(e.source is ScaleSource.RULE for e in found)


async def test_a_rolling_update_keeps_the_desired_replicas_healthy_and_finishes(
    bus: Bus, store: EventStore, image: str, fresh: Fresh
) -> None:
    owner, name, endpoint_id = fresh
    async with controller(bus) as service, machine(store, image, service):
        await accepted(bus, create(name, owner, revision(image), replicas=2,
                                   scaling=Scaling(min_replicas=1, max_replicas=3)))  # fmt: skip
        await wait_for(store, endpoint_id, ReplicaHealthChanged, 2, healthy)
        await accepted(bus, on(UpdateEndpoint, owner, endpoint_id, spec=revision(image, "2")))
        (done,) = await wait_for(store, endpoint_id, EndpointRolloutFinished)
        assert done.revision == 2
        # Replayed event by event: once READY, never fewer than 2 replicas serving
        # (max_unavailable 0), never more than 3 live (max_surge 1).
        serving: set[int] = set()
        live: set[int] = set()
        for event in await events_of(store, endpoint_id, Event):
            if isinstance(event, ReplicaRequested):
                live.add(event.replica)
            elif isinstance(event, ReplicaHealthChanged) and healthy(event):
                serving.add(event.replica)
            elif isinstance(event, ReplicaRetired | ReplicaEnded):
                if event.replica in serving:
                    assert len(serving) - 1 >= 2, (event, serving)
                serving.discard(event.replica)
                live.discard(event.replica)
            assert len(live) <= 3
        found = service.endpoint(endpoint_id)
        assert found is not None and found.current_revision == 2
        assert {r.revision for r in found.live} == {2} and found.status() is EndpointStatus.READY
        await accepted(bus, on(DestroyEndpoint, owner, endpoint_id))
        await wait_for(store, endpoint_id, EndpointDestroyed)


async def test_a_create_the_scheduler_refuses_fails_the_replica_with_its_reason(
    bus: Bus, store: EventStore, image: str, fresh: Fresh
) -> None:
    owner, name, endpoint_id = fresh
    spec = revision(image).model_copy(update={"model_folder": "no-such-model"})
    async with controller(bus) as service, machine(store, image, service):
        await accepted(bus, create(name, owner, spec, replicas=1))
        (ended,) = await wait_for(store, endpoint_id, ReplicaEnded)
        assert ended.failed and ended.reason.startswith("its session could not be created: ")
        assert "no-such-model" in ended.reason
        # The next ask waits (2 s after one failure): no spinning.
        await asyncio.sleep(1)
        assert len(await events_of(store, endpoint_id, ReplicaRequested)) == 1
        found = service.endpoint(endpoint_id)
        assert found is not None and found.status() is EndpointStatus.UNAVAILABLE
        await accepted(bus, on(DestroyEndpoint, owner, endpoint_id))
        await wait_for(store, endpoint_id, EndpointDestroyed)


async def test_a_probe_says_what_it_met() -> None:
    client = httpx.AsyncClient()
    replica = await serve(200)
    try:
        check = HealthCheck(timeout_s=1)
        assert await probe_once(client, replica.address, check) == Probe(True, "GET /health: 200")
        replica.health = 503
        failed = await probe_once(client, replica.address, check)
        assert failed == Probe(False, "GET /health: 503 Service Unavailable: model failed to load")
        await replica.runner.cleanup()
        gone = await probe_once(client, replica.address, check)
        assert gone == Probe(False, f"GET /health: connection refused ({replica.address})")
    finally:
        await client.aclose()
        await replica.runner.cleanup()


async def test_a_retired_replica_is_drained_of_its_requests_before_its_session_ends(
    bus: Bus, store: EventStore, image: str, fresh: Fresh
) -> None:
    owner, name, endpoint_id = fresh
    proxy = f"proxy-{new_id()[:8]}"
    inflight = [1]

    async def report() -> None:  # one app proxy, one request on replica 1 until told otherwise
        while True:
            load = {"requests": 1, "inflight": inflight[0],
                    "replicas": {"1": {"requests": 1, "inflight": inflight[0]}}}  # fmt: skip
            body = {"proxy": proxy, "at": time.time(), "endpoints": {endpoint_id: load}}
            await bus.nc.publish(f"{SERVING_LOAD_PREFIX}.{proxy}", json.dumps(body).encode())
            await asyncio.sleep(0.2)

    reporter = asyncio.create_task(report())
    try:
        async with controller(bus) as service, machine(store, image, service):
            bounds = Scaling(min_replicas=0, max_replicas=1)
            await accepted(bus, create(name, owner, revision(image), replicas=1, scaling=bounds))
            (first,) = await wait_for(store, endpoint_id, ReplicaRequested)
            await wait_for(store, endpoint_id, ReplicaHealthChanged, 1, healthy)
            await accepted(bus, on(ScaleEndpoint, owner, endpoint_id, replicas=0))
            await wait_for(store, endpoint_id, ReplicaRetired)
            await asyncio.sleep(3)  # past the settle time: still one request in flight
            session = (await load(store, Session, first.session_id)).aggregate
            assert session is not None and session.status is SessionStatus.RUNNING
            inflight[0] = 0  # it was answered
            ended = await wait_for(store, endpoint_id, ReplicaEnded)
            assert ended[0].reason.startswith("retired; its session ended")
            await accepted(bus, on(DestroyEndpoint, owner, endpoint_id))
            await wait_for(store, endpoint_id, EndpointDestroyed)
    finally:
        reporter.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reporter
