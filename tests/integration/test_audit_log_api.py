"""The auditors' API through the real gateway: a domain auditor reads its domain's events
(filtered by aggregate, name, actor, time; paged) and never another domain's; a superauditor
reads every domain's; users and monitors are refused the log; auditors are refused every
mutation, and the refusal is in the access log they read."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from events.bus import Bus
from events.domain.session import SessionRequested
from events.envelope import Envelope
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.sdk import JetyardAuth
from schemas.ids import event_id_for, new_id
from schemas.principal import Actor, ActorKind, Tenant
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import project_id_for
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway

LOG = """query($after: Int!, $first: Int!, $f: AuditFilter) {
  auditLog(after: $after, first: $first, filter: $f) {
    events { seq name aggregateType aggregateId actor domain causationId correlationId }
    nextAfter hasMore scanned } }"""


@dataclass
class World:
    gw: Gateway
    da: str
    db: str
    auth: dict[str, JetyardAuth]
    keys: dict[str, str]
    sessions: dict[str, str]


async def requested(bus: Bus, domain: str, access_key: str) -> str:
    """A session of ``domain`` requested by ``access_key``, written as the scheduler would."""
    ref, cause = AggregateRef(AggregateType.SESSION, new_id()), new_id()
    spec = SessionSpec(image="img", kernels=(KernelSpec(resources=ResourceSlots(cpu_milli=100)),))
    event = SessionRequested(spec=spec, kernel_ids=(new_id(),))
    envelope = Envelope(
        event_id=event_id_for(cause, ref.type.value, ref.id, 1), name=event.event_name,
        schema_version=event.schema_version, aggregate_type=ref.type, aggregate_id=ref.id,
        aggregate_version=1, occurred_at=datetime.now(UTC), causation_id=cause,
        correlation_id=cause, actor=Actor(kind=ActorKind.KEYPAIR, id=access_key),
        tenant=Tenant(domain=domain, project=project_id_for(domain, "lab")),
        payload=event.model_dump(mode="json"),
    )  # fmt: skip
    await EventStore(bus).append(Write(ref, 0, (envelope,)))
    return ref.id


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async with running_gateway(bus, Path(tmp_path_factory.mktemp("audit-api"))) as gw:
        tag = new_id()[:6]
        da, db = f"aa-{tag}", f"ab-{tag}"
        for name in (da, db):
            await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=name)
            await gql_ok(
                gw, 'mutation($d: String!) { createProject(domain: $d, name: "lab") { id } }',
                d=name,
            )  # fmt: skip
        auth, keys = {}, {}
        for name, domain, role in (
            ("auditor", da, "auditor"), ("super", da, "superauditor"), ("admin", da, "admin"),
            ("user", da, "user"), ("monitor", da, "monitor"), ("other", db, "user"),
        ):  # fmt: skip
            owner, signing, _ = await person(gw, name, domain, "lab", role)
            auth[name], keys[name] = signing, owner.access_key
        sessions = {
            "a": await requested(bus, da, keys["user"]),
            "b": await requested(bus, db, keys["other"]),
        }
        yield World(gw, da, db, auth, keys, sessions)


async def page(w: World, who: str, *, after: int = 0, first: int = 100, **f: Any) -> Any:
    return await w.gw.gql(LOG, auth=w.auth[who], after=after, first=first, f=f or None)


async def events(w: World, who: str, **f: Any) -> list[dict[str, Any]]:
    """Every event the caller may read that matches, page after page."""
    found, after = [], 0
    while True:
        body = await page(w, who, after=after, **f)
        assert "errors" not in body, body
        answer = body["data"]["auditLog"]
        found += answer["events"]
        if not answer["hasMore"]:
            return found
        after = answer["nextAfter"]


async def next_one(w: World, after: int) -> dict[str, Any]:
    """The auditor's next event after ``after``, asked for one at a time."""
    while True:
        answer = (await page(w, "auditor", after=after, first=1))["data"]["auditLog"]
        if answer["events"]:
            found: dict[str, Any] = answer["events"][0]
            return found
        assert answer["hasMore"], answer
        after = answer["nextAfter"]


def code(body: dict[str, Any]) -> str:
    assert body.get("errors"), body
    return str(body["errors"][0]["extensions"]["code"])


async def test_a_domain_auditor_reads_its_domain_and_never_another(world: World) -> None:
    mine = await events(world, "auditor", aggregateType="session")
    ids = {e["aggregateId"] for e in mine}
    assert world.sessions["a"] in ids and world.sessions["b"] not in ids
    assert {e["domain"] for e in await events(world, "auditor")} == {world.da}
    assert code(await page(world, "auditor", domain=world.db)) == "forbidden"
    admin = {e["aggregateId"] for e in await events(world, "admin", aggregateType="session")}
    assert admin == ids


async def test_a_superadmins_change_to_a_keypair_is_in_its_domains_log(world: World) -> None:
    # The superadmin's command carries the superadmin's tenant, and a keypair's later events
    # name no domain: the directory says whose it is.
    owner, _, _ = await person(world.gw, "leaver", world.da, "lab")
    ak = owner.access_key
    deactivate = 'mutation($k: ID!) { deactivateKeypair(accessKey: $k, reason: "left") { status } }'
    await gql_ok(world.gw, deactivate, k=ak)
    seen = await events(world, "auditor", aggregateType="keypair", aggregateId=ak)
    assert len(seen) >= 2 and {e["domain"] for e in seen} == {world.da}, seen
    assert "Deactivated" in seen[-1]["name"], seen[-1]
    assert seen[-1]["actor"] == f"keypair:{world.gw.admin.access_key}"


async def test_a_superauditor_reads_every_domain_or_one(world: World) -> None:
    both = {e["aggregateId"] for e in await events(world, "super", aggregateType="session")}
    assert {world.sessions["a"], world.sessions["b"]} <= both
    other = await events(world, "super", domain=world.db)
    assert other and {e["domain"] for e in other} == {world.db}


async def test_filters_by_aggregate_name_actor_and_time_and_pages(world: World) -> None:
    session = world.sessions["a"]
    one = await events(world, "auditor", aggregateType="session", aggregateId=session)
    assert [(e["name"], e["aggregateId"]) for e in one] == [("SessionRequested", session)]
    assert one[0]["actor"] == f"keypair:{world.keys['user']}"
    by_actor = await events(world, "auditor", actor=f"keypair:{world.keys['user']}")
    assert session in {e["aggregateId"] for e in by_actor}
    assert {e["actor"] for e in by_actor} == {f"keypair:{world.keys['user']}"}
    assert await events(world, "auditor", actor=world.keys["user"]) == by_actor
    named = await events(world, "auditor", names=["UserCreated"])
    assert named and {e["name"] for e in named} == {"UserCreated"}
    # One at a time from the domain's first event (a page looks at 5,000 events of the shared
    # log at most, so one from the start may come back empty with more to read).
    mine = await events(world, "auditor")
    first = (await page(world, "auditor", after=mine[0]["seq"] - 1, first=1))["data"]["auditLog"]
    assert first["events"] == mine[:1] and first["hasMore"]
    second = await next_one(world, first["nextAfter"])
    assert second == mine[1]
    await asyncio.sleep(0.01)
    now = datetime.now(UTC)
    later = await requested(world.gw.services.bus, world.da, world.keys["user"])
    since = await events(world, "auditor", since=now.isoformat())
    assert [e["aggregateId"] for e in since] == [later]
    until = await events(world, "auditor", until=now.isoformat(), aggregateType="session")
    assert later not in {e["aggregateId"] for e in until} and session in {
        e["aggregateId"] for e in until
    }


async def test_the_log_refuses_others_and_bad_filters_with_the_reason(world: World) -> None:
    assert code(await page(world, "user")) == "forbidden"
    assert code(await page(world, "monitor")) == "forbidden"
    assert code(await page(world, "auditor", aggregateType="nosuch")) == "invalid"
    assert code(await page(world, "auditor", aggregateId="x")) == "invalid"
    assert code(await page(world, "auditor", actor="robot:x")) == "invalid"
    assert code(await page(world, "auditor", first=0)) == "invalid"
    assert code(await page(world, "auditor", names=["a.b"])) == "invalid"


async def test_auditors_act_on_nothing_and_their_refusals_are_on_record(world: World) -> None:
    for who in ("auditor", "super"):
        for mutation in (
            'mutation { createVFolder(input: {name: "x"}) { status } }',
            'mutation { createSession(input: {image: "img"}) { status } }',
            'mutation { createDomain(name: "zz") { id } }',
        ):
            body = await world.gw.gql(mutation, auth=world.auth[who])
            assert code(body) == "forbidden", (who, mutation, body)
            assert "read; they act on nothing" in body["errors"][0]["message"]
    made = await world.gw.gql(
        """mutation($d: String!) { createUser(email: "x@example.org", password: "pw-123456",
             domain: $d, role: "superauditor") { id } }""",
        auth=world.auth["admin"], d=world.da,
    )  # fmt: skip
    assert code(made) == "forbidden"
    access = await world.gw.gql(
        "{ accessLog(first: 500, refusedOnly: true) { operation outcome userId } }",
        auth=world.auth["auditor"],
    )
    assert "errors" not in access, access
    entries = access["data"]["accessLog"]
    assert any("createSession" in e["operation"] for e in entries)
    assert all(e["outcome"] != "ok" for e in entries)


async def jetyard(w: World, who: str, *args: str) -> asyncio.subprocess.Process:
    auth = w.auth[who]
    env = {
        **os.environ, "JETYARD_ENDPOINT": w.gw.url, "JETYARD_ACCESS_KEY": auth.access_key,
        "JETYARD_SECRET_KEY": auth._secret_key, "XDG_CONFIG_HOME": "/nonexistent",
    }  # fmt: skip
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "jetyard"), "audit", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_the_cli_prints_the_log_follows_it_and_says_refusals(world: World) -> None:
    done = await jetyard(world, "auditor", "log", "--aggregate", "session")
    out, err = await done.communicate()
    assert done.returncode == 0, err
    ids = {json.loads(line)["aggregateId"] for line in out.decode().splitlines()}
    assert world.sessions["a"] in ids and world.sessions["b"] not in ids
    other = await jetyard(world, "auditor", "log", "--domain", world.db)
    _, err = await other.communicate()
    assert (
        other.returncode == 1 and "forbidden" in err.decode()
    ) or "only auditors" in err.decode()
    follow = await jetyard(world, "auditor", "log", "--aggregate", "session", "--follow")
    try:
        assert follow.stdout is not None
        async with asyncio.timeout(20):
            while world.sessions["a"] not in (await follow.stdout.readline()).decode():
                pass
            later = await requested(world.gw.services.bus, world.da, world.keys["user"])
            while later not in (await follow.stdout.readline()).decode():
                pass
    finally:
        follow.kill()
        await follow.wait()
    refusals = await jetyard(world, "auditor", "refusals", "--first", "500")
    out, err = await refusals.communicate()
    assert refusals.returncode == 0, err
    assert all(json.loads(line)["outcome"] != "ok" for line in out.decode().splitlines())
