"""``asOf``: the state of a past moment equals what the live queries answered then. A scripted
history (users and keypairs, a folder, sessions placed, running and ended, a node cordoned,
a keypair deactivated) runs through the real gateway, scheduler and storage service on a
server of its own; after each step the live answers are recorded with their log position and
time. Afterwards ``asOf`` is asked for every step, by position and by time, as a
superadmin and as a domain auditor, and must answer what was recorded. Snapshots are taken
every few events here, so answers start from them. Users are refused ``asOf``, and a moment
the log does not hold is refused naming why."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from events.bus import Bus
from events.store import EventStore
from jetyard.runtime.natsserver import NatsServer
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM
from services.scheduler.service import Scheduler, nodes_durable
from services.scheduler.settings import SchedulerSettings
from services.storage.control.service import StorageService
from services.storage.settings import StorageSettings
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.integration.scheduler_support import FakeAgent, eventually, slots
from tests.integration.storage_support import KEY
from tests.nats_support import bus_with_streams, settings_of

IMAGE = "as-of:1"
SNAPSHOT_EVERY = 7

STATE = """query($domain: String!, $user: ID!, $asOf: AsOf) {
  sessions(first: 50, asOf: $asOf) { seq totalCount edges { cursor node {
    id status statusReason nodeIds kernelIds exitCode result createdAt updatedAt seq
    history { status reason } } } }
  nodes(asOf: $asOf) { id hostname state reason cordoned allocations }
  vfolders(first: 50, asOf: $asOf) { totalCount edges { node {
    id name status ownerId usageMode mountedBy updatedAt } } }
  users(domain: $domain, asOf: $asOf) { id role email active projects defaultAccessKey }
  projects(domain: $domain, asOf: $asOf) { id name }
  keypairs(userId: $user, asOf: $asOf) { accessKey active isDefault policy }
  domains(asOf: $asOf) { name active }
  resourcePolicies(asOf: $asOf) { kind name }
}"""


@dataclass
class Moment:
    step: str
    position: int
    at: datetime
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The live answers, by who asked."""


@dataclass
class World:
    gw: Gateway
    bus: Bus
    store: EventStore
    auth: dict[str, JetyardAuth]
    user_id: str
    moments: list[Moment]


async def quiet(gw: Gateway, store: EventStore) -> int:
    """Wait until the log stops growing and the views hold all of it; its last position."""
    last, since = -1, asyncio.get_running_loop().time()
    while True:
        end = await store.stream_last_seq()
        now = asyncio.get_running_loop().time()
        if end != last:
            last, since = end, now
        elif now - since > 0.4 and await gw.services.views.position() >= end:
            return end
        await asyncio.sleep(0.05)


async def state(gw: Gateway, auth: JetyardAuth, user_id: str, **as_of: Any) -> dict[str, Any]:
    body = await gw.gql(
        STATE, auth=auth, domain="default", user=user_id, asOf=as_of or None
    )  # fmt: skip
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def record(w: World, step: str) -> None:
    """The live answers once the log is quiet; again if it moved while they were read (a
    service's late event on a loaded machine)."""
    for _ in range(20):
        position = await quiet(w.gw, w.store)
        await asyncio.sleep(0.01)
        moment = Moment(step, position, datetime.now(UTC))
        for who, auth in w.auth.items():
            moment.answers[who] = await state(w.gw, auth, w.user_id)
        if await w.store.stream_last_seq() == position:
            w.moments.append(moment)
            return
    raise AssertionError(f"{step}: the log kept moving while the answers were read")


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    root = Path(tmp_path_factory.mktemp("as-of"))
    server = NatsServer(data_dir=root / "nats").start()
    try:
        async with bus_with_streams(settings_of(server), "as-of") as bus, play(bus, root) as w:
            yield w
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def play(bus: Bus, root: Path) -> AsyncIterator[World]:
    store = EventStore(bus)
    storage = StorageService(
        bus,
        StorageSettings(
            token_key=KEY, volumes={"local": {"backend": "local", "root": root / "local"}},
            default_volume="local", durable=f"storage-{new_id()[:8]}", poll_timeout_s=0.2,
            command_fetch_timeout_s=0.2,
        ),
    )  # fmt: skip
    scheduler = Scheduler(
        bus,
        SchedulerSettings(
            durable=f"scheduler-{new_id()[:8]}", poll_timeout_s=0.25,
            command_fetch_timeout_s=0.2, watch_heartbeats=False,
        ),
    )  # fmt: skip
    try:
        await storage.start()
        await scheduler.start()
        async with running_gateway(
            bus, root / "gateway", command_timeout_s=10.0, history_dir=root / "history",
            history_snapshot_every=SNAPSHOT_EVERY,
        ) as gw:  # fmt: skip
            owner, user, _ = await person(gw, "researcher", "default", "default")
            _, auditor, _ = await person(gw, "auditor", "default", "default", "auditor")
            w = World(gw, bus, store, {"root": gw.root, "auditor": auditor}, owner.user_id, [])
            await storage.sync()
            await script(w, user, owner.access_key)
            yield w
    finally:
        await scheduler.stop()
        await storage.stop()
        for durable in (
            scheduler.settings.durable, nodes_durable(scheduler.settings.durable),
            storage.settings.durable,
        ):  # fmt: skip
            with contextlib.suppress(NotFoundError):
                await bus.js.delete_consumer(COMMANDS_STREAM, durable)


async def script(w: World, user: JetyardAuth, access_key: str) -> None:
    gw = w.gw
    await record(w, "people")
    agent = FakeAgent(w.store, slots(cpu=4, mem=4), (IMAGE,), volumes=("local",))
    await agent.register()
    made = await gw.gql(
        'mutation { createVFolder(input: {name: "data"}) { status folder { id } } }', auth=user
    )
    assert "errors" not in made, made
    folder = made["data"]["createVFolder"]["folder"]["id"]
    await record(w, "a node and a folder")

    create = """mutation($i: CreateSessionInput!) { createSession(input: $i) { sessionId } }"""
    spec = {"image": IMAGE, "cpu": "1", "memory": "256m", "mounts": [{"folder": "data"}]}
    first = await gw.gql(create, auth=user, i=spec)
    assert "errors" not in first, first
    job = first["data"]["createSession"]["sessionId"]
    kernel = (await kernels_of(gw, job))[0]
    await record(w, "a session placed")

    await agent.started(kernel, job)
    await record(w, "it runs")

    cordon = 'mutation($id: ID!) { cordonNode(id: $id, reason: "disk check") { status } }'
    await gql_ok(gw, cordon, id=agent.id)
    second = await gw.gql(create, auth=user, i={"image": IMAGE, "cpu": "1", "memory": "256m"})
    assert "errors" not in second, second
    await record(w, "the node cordoned, a second session waits")

    await agent.exited(kernel, 0)
    renamed = await gw.gql(
        'mutation($id: String!) { renameVFolder(id: $id, name: "results") { status } }',
        auth=user, id=folder,
    )  # fmt: skip
    assert "errors" not in renamed, renamed
    await record(w, "the first ended, the folder renamed")

    await gql_ok(
        gw, 'mutation($k: ID!) { deactivateKeypair(accessKey: $k, reason: "left") { status } }',
        k=access_key,
    )  # fmt: skip
    await gql_ok(gw, "mutation($id: ID!) { uncordonNode(id: $id) { status } }", id=agent.id)
    await record(w, "the keypair deactivated, the node uncordoned")


async def kernels_of(gw: Gateway, session_id: str) -> list[str]:
    async def placed() -> list[str] | None:
        body = await gw.gql(
            "query($id: ID!) { session(id: $id) { status statusReason kernelIds } }", id=session_id
        )
        found = body["data"]["session"]
        return found["kernelIds"] if found and found["status"] == "SCHEDULED" else None

    return await eventually(placed, timeout=15, what="the session placed")


async def test_as_of_a_position_answers_what_the_live_queries_did_then(world: World) -> None:
    assert len(world.moments) == 7
    positions = [m.position for m in world.moments]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    for moment in reversed(world.moments):  # from the newest: builds start from snapshots
        for who, auth in world.auth.items():
            past = await state(world.gw, auth, world.user_id, position=moment.position)
            assert past == moment.answers[who], f"{moment.step}, asked by {who}"
    # The history differs from step to step: the comparison above could not pass by accident.
    first, last = world.moments[0].answers["root"], world.moments[-1].answers["root"]
    assert first["sessions"]["edges"] == [] and len(last["sessions"]["edges"]) == 2
    assert world.gw.services.histories is not None
    assert world.gw.services.histories.views.snapshots  # the builds kept snapshots


async def test_as_of_a_time_answers_the_last_event_stored_by_then(world: World) -> None:
    for moment in world.moments:
        past = await state(world.gw, world.gw.root, world.user_id, at=moment.at.isoformat())
        assert past == moment.answers["root"], moment.step
    before = world.moments[0].at - timedelta(days=1)
    empty = await state(world.gw, world.gw.root, world.user_id, at=before.isoformat())
    assert empty["users"] == [] and empty["sessions"]["edges"] == [] and empty["nodes"] == []


async def test_users_are_refused_and_a_moment_off_the_log_is_refused_naming_why(
    world: World,
) -> None:
    gw, end = world.gw, await world.store.stream_last_seq()
    _, user, _ = await person(gw, "curious", "default", "default")
    asked = await gw.gql(
        "query($a: AsOf) { sessions(asOf: $a) { seq } }", auth=user, a={"position": 1}
    )
    assert asked["errors"][0]["extensions"]["code"] == "forbidden", asked
    beyond = await gw.gql("query($a: AsOf) { nodes(asOf: $a) { id } }", a={"position": end + 1_000})
    assert beyond["errors"][0]["extensions"]["code"] == "invalid"
    assert "is not on the log" in beyond["errors"][0]["message"]
    both = await gw.gql(
        "query($a: AsOf) { nodes(asOf: $a) { id } }",
        a={"position": 1, "at": datetime.now(UTC).isoformat()},
    )
    assert "exactly one of at and position" in both["errors"][0]["message"]
    three = await gw.gql(
        "{ a: nodes(asOf: {position: 1}) { id } b: nodes(asOf: {position: 2}) { id } "
        "c: nodes(asOf: {position: 3}) { id } }"
    )
    assert [e["message"] for e in three["errors"]] == [
        "one request reads at most 2 moments of the past"
    ], three
    naive = await gw.gql(
        "query($a: AsOf) { nodes(asOf: $a) { id } }", a={"at": "2026-11-28T14:00:00"}
    )
    assert "time zone" in naive["errors"][0]["message"]


async def audit_state(w: World, *args: str) -> dict[str, Any]:
    auth = w.auth["auditor"]
    env = {
        **os.environ, "JETYARD_ENDPOINT": w.gw.url, "JETYARD_ACCESS_KEY": auth.access_key,
        "JETYARD_SECRET_KEY": auth._secret_key, "XDG_CONFIG_HOME": "/nonexistent",
    }  # fmt: skip
    done = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "jetyard"), "audit", "state", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await done.communicate()
    assert done.returncode == 0, err.decode()
    found: dict[str, Any] = json.loads(out)
    return found


async def test_the_cli_prints_a_moment_as_an_auditor_read_it_then(world: World) -> None:
    moment = world.moments[3]  # "it runs"
    recorded = moment.answers["auditor"]
    by_time = await audit_state(world, "--at", moment.at.isoformat())
    by_position = await audit_state(world, "--at", str(moment.position))
    assert by_time["position"] == by_position["position"] == moment.position
    assert by_time["sessions"] == by_position["sessions"]
    sessions = [(s["id"], s["status"]) for s in by_time["sessions"]]
    live = [(e["node"]["id"], e["node"]["status"]) for e in recorded["sessions"]["edges"]]
    assert sessions == live == [(live[0][0], "RUNNING")]
    assert [n["id"] for n in by_time["nodes"]] == [n["id"] for n in recorded["nodes"]]
    assert [f["name"] for f in by_time["folders"]] == ["data"]  # renamed "results" later
    assert {u["id"] for u in by_time["users"]} >= {world.user_id}
    mine = [k for k in by_time["keypairs"] if k["userId"] == world.user_id]
    pairs = [(k["accessKey"], k["active"]) for k in mine]
    assert pairs == [(k["accessKey"], k["active"]) for k in recorded["keypairs"]]
    assert all(active for _, active in pairs)  # one is deactivated later:
    later = world.moments[-1].answers["auditor"]["keypairs"]
    assert not all(k["active"] for k in later)
    assert all("secret" not in key.lower() for k in mine for key in k)
    only = await audit_state(world, "--at", str(moment.position), "--only", "nodes")
    assert set(only) == {"position", "nodes"}
