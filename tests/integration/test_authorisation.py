"""Authentication and authorisation through the real gateway: signatures (good, wrong
secret, stale date, replayed, deactivated keypair), the role x object matrix over queries and
mutations, bad admin input, and no secret key anywhere in the streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from nats.js.errors import NotFoundError

from commands.repository import pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.principal import Actor, Tenant
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import (
    ACCESS_STREAM,
    COMMANDS_STREAM,
    EVENTS_STREAM,
    OUTCOMES_STREAM,
)
from schemas.tenancy import SessionOwner, project_id_for
from tests.integration.gateway_support import Gateway, running_gateway
from tests.support import NOW

OK = "ok"
DENIED = "denied"


@dataclass
class Person:
    user_id: str
    auth: JetyardAuth
    access_key: str
    secret_key: str
    domain: str
    project_id: str


@dataclass
class World:
    gw: Gateway
    da: str
    db: str
    people: dict[str, Person]
    sessions: dict[str, str]  # owner name -> session id


async def _ok(gw: Gateway, query: str, **variables: Any) -> dict[str, Any]:
    body = await gw.gql(query, **variables)
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def _person(gw: Gateway, name: str, domain: str, role: str) -> Person:
    project = project_id_for(domain, "lab")
    email = f"{name}-{new_id()[:6]}@example.org"
    user = await _ok(
        gw,
        """mutation($e: String!, $d: String!, $r: String!, $p: [ID!]) {
            createUser(email: $e, password: "pw-123456", domain: $d, role: $r, projects: $p) {
            id } }""",
        e=email, d=domain, r=role, p=[project],
    )  # fmt: skip
    user_id = user["createUser"]["id"]
    issued = await _ok(
        gw,
        "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }",
        u=user_id,
    )
    ak, sk = issued["createKeypair"]["accessKey"], issued["createKeypair"]["secretKey"]
    return Person(user_id, JetyardAuth(ak, sk), ak, sk, domain, project)


async def _session_of(store: EventStore, person: Person) -> str:
    owner = SessionOwner(
        access_key=person.access_key, user_id=person.user_id,
        project_id=person.project_id, domain=person.domain,
    )  # fmt: skip
    spec = SessionSpec(
        image="busybox", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.1")),)
    )
    session = Session.request(new_id(), spec, NOW, owner=owner)
    command = new_id()
    cause = Cause(
        causation_id=command, correlation_id=command, actor=Actor.service("tests"),
        tenant=Tenant(domain=person.domain),
    )  # fmt: skip
    write = pending_write((session, 0), cause)
    assert write is not None
    await store.append(write)
    return session.id


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async with running_gateway(bus, tmp_path_factory.mktemp("authz"), command_timeout_s=2.0) as gw:
        tag = new_id()[:6]
        da, db = f"da-{tag}", f"db-{tag}"
        for domain in (da, db):
            await _ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
            await _ok(
                gw,
                'mutation($d: String!) { createProject(domain: $d, name: "lab") { id } }',
                d=domain,
            )
        people = {
            "admin": await _person(gw, "admin", da, "admin"),
            "user": await _person(gw, "user", da, "user"),
            "monitor": await _person(gw, "monitor", da, "monitor"),
            "peer": await _person(gw, "peer", da, "user"),
            "stranger": await _person(gw, "stranger", db, "user"),
        }
        store = EventStore(bus)
        sessions = {name: await _session_of(store, p) for name, p in people.items()}
        for _ in range(200):  # the views have the sessions
            if (await gw.client.get(f"{gw.url}/healthz")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        yield World(gw, da, db, people, sessions)


def _auth(world: World, role: str) -> JetyardAuth:
    return world.gw.root if role == "superadmin" else world.people[role].auth


def _object(world: World, role: str, relation: str) -> str:
    """The session that is the caller's own, of someone in the same domain, or of another."""
    if role == "superadmin":
        return world.sessions[{"own": "admin", "same": "user", "other": "stranger"}[relation]]
    mine = role if role != "monitor" else "monitor"
    return world.sessions[{"own": mine, "same": "peer", "other": "stranger"}[relation]]


def _verdict(body: dict[str, Any], field: str) -> str:
    if body.get("errors"):
        codes = {(e.get("extensions") or {}).get("code") for e in body["errors"]}
        assert codes <= {"forbidden", "not-found"}, body  # a refusal, not a crash
        return DENIED
    return OK if body["data"][field] is not None else DENIED


READ = {  # role -> relation -> may read the session
    "superadmin": {"own": OK, "same": OK, "other": OK},
    "admin": {"own": OK, "same": OK, "other": DENIED},
    "monitor": {"own": OK, "same": OK, "other": DENIED},
    "user": {"own": OK, "same": DENIED, "other": DENIED},
}
ACT = {  # role -> relation -> may terminate the session
    "superadmin": {"own": OK, "same": OK, "other": OK},
    "admin": {"own": OK, "same": OK, "other": DENIED},
    "monitor": {"own": DENIED, "same": DENIED, "other": DENIED},
    "user": {"own": OK, "same": DENIED, "other": DENIED},
}
CASES = [(role, rel) for role in READ for rel in ("own", "same", "other")]


@pytest.mark.parametrize(("role", "relation"), CASES)
async def test_reading_a_session(world: World, role: str, relation: str) -> None:
    session_id = _object(world, role, relation)
    auth = _auth(world, role)
    one = await world.gw.gql(
        "query($id: ID!) { session(id: $id) { id } }", auth=auth, id=session_id
    )
    listed = await world.gw.gql(
        "{ sessions(first: 500) { totalCount edges { node { id } } } }", auth=auth
    )
    ids = {e["node"]["id"] for e in listed["data"]["sessions"]["edges"]}
    if role != "superadmin":  # counted in the same scope as listed
        assert listed["data"]["sessions"]["totalCount"] == len(ids)
    assert _verdict(one, "session") == READ[role][relation]
    assert (OK if session_id in ids else DENIED) == READ[role][relation] or (
        role == "superadmin"  # a superadmin's first page may end before this session
    )


@pytest.mark.parametrize(("role", "relation"), CASES)
async def test_terminating_a_session(world: World, role: str, relation: str) -> None:
    session_id = _object(world, role, relation)
    body = await world.gw.gql(
        "mutation($id: ID!) { terminateSession(id: $id) { status } }",
        auth=_auth(world, role),
        id=session_id,
    )
    assert _verdict(body, "terminateSession") == ACT[role][relation]


ROLES = ("superadmin", "admin", "monitor", "user")
ADMIN_CASES = {
    # (operation, the domain the object lies in) -> verdicts for ROLES, in order
    ("createProject", "same"): (OK, OK, DENIED, DENIED),
    ("createProject", "other"): (OK, DENIED, DENIED, DENIED),
    ("createDomain", "-"): (OK, DENIED, DENIED, DENIED),
    ("createResourcePolicy", "-"): (OK, DENIED, DENIED, DENIED),
    ("nodes", "-"): (OK, OK, OK, DENIED),
    ("accessLog", "same"): (OK, OK, OK, DENIED),
    ("deactivateKeypair", "same"): (OK, OK, DENIED, DENIED),
}


async def _admin_call(world: World, op: str, where: str, role: str) -> dict[str, Any]:
    gw, auth, tag = world.gw, _auth(world, role), new_id()[:6]
    domain = world.da if where == "same" else world.db
    if op == "createProject":
        query = "mutation($d: String!, $n: String!) { createProject(domain: $d, name: $n) { id } }"
        return await gw.gql(query, auth=auth, d=domain, n=f"p-{tag}")
    if op == "createDomain":
        return await gw.gql(
            "mutation($n: String!) { createDomain(name: $n) { id } }", auth=auth, n=f"x-{tag}"
        )
    if op == "createResourcePolicy":
        query = 'mutation($n: String!) { createResourcePolicy(kind: "user", name: $n) { id } }'
        return await gw.gql(query, auth=auth, n=f"rp-{tag}")
    if op == "nodes":
        return await gw.gql("{ nodes { id } }", auth=auth)
    if op == "accessLog":
        return await gw.gql("{ accessLog(first: 5) { seq operation } }", auth=auth)
    # deactivateKeypair: a fresh keypair of the peer each time, so nobody loses their own
    issued = await _ok(
        gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey } }",
        u=world.people["peer"].user_id,
    )  # fmt: skip
    query = "mutation($k: ID!) { deactivateKeypair(accessKey: $k) { id } }"
    return await gw.gql(query, auth=auth, k=issued["createKeypair"]["accessKey"])


@pytest.mark.parametrize(
    ("op", "where", "role"),
    [(op, where, role) for (op, where) in ADMIN_CASES for role in ROLES],
)
async def test_administration(world: World, op: str, where: str, role: str) -> None:
    body = await _admin_call(world, op, where, role)
    assert _verdict(body, op) == ADMIN_CASES[(op, where)][ROLES.index(role)], body


# ---- signatures ---------------------------------------------------------------------------


async def _post(world: World, auth: httpx.Auth) -> httpx.Response:
    return await world.gw.client.post(
        f"{world.gw.url}/graphql", json={"query": "{ viewer { userId } }"}, auth=auth
    )


def _code(response: httpx.Response) -> str:
    code: str = response.json()["errors"][0]["extensions"]["code"]
    return code


async def test_signatures_good_wrong_stale_replayed_and_deactivated(world: World) -> None:
    person = world.people["user"]
    good = await _post(world, person.auth)
    assert good.status_code == 200 and good.json()["data"]["viewer"]["userId"] == person.user_id

    wrong = await _post(world, JetyardAuth(person.access_key, "not-the-secret"))
    assert (wrong.status_code, _code(wrong)) == (401, "bad-signature")

    def late() -> datetime:
        return datetime.now(UTC) - timedelta(minutes=20)

    stale = await _post(world, JetyardAuth(person.access_key, person.secret_key, clock=late))
    assert (stale.status_code, _code(stale)) == (401, "stale-date")

    request = world.gw.client.build_request(
        "POST", f"{world.gw.url}/graphql", json={"query": "{ viewer { userId } }"}
    )
    signed = next(person.auth.auth_flow(request))
    first = await world.gw.client.send(signed)
    again = await world.gw.client.send(signed)
    assert first.status_code == 200
    assert (again.status_code, _code(again)) == (401, "replayed")

    spare = await _ok(
        world.gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }",
        u=person.user_id,
    )  # fmt: skip
    ak, sk = spare["createKeypair"]["accessKey"], spare["createKeypair"]["secretKey"]
    assert (await _post(world, JetyardAuth(ak, sk))).status_code == 200
    await _ok(world.gw, "mutation($k: ID!) { deactivateKeypair(accessKey: $k) { id } }", k=ak)
    refused = await _post(world, JetyardAuth(ak, sk))
    assert (refused.status_code, _code(refused)) == (401, "keypair-inactive")

    unsigned = await world.gw.client.post(
        f"{world.gw.url}/graphql", json={"query": "{ sessions { edges { cursor } } }"}
    )
    assert unsigned.json()["errors"][0]["extensions"]["code"] == "unauthenticated"


async def test_a_login_token_works_until_logout(world: World) -> None:
    # People log in with email and password; the token is a bearer credential.
    email = f"login-{new_id()[:6]}@example.org"
    await _ok(
        world.gw,
        'mutation($e: String!, $d: String!) { createUser(email: $e, password: "s3cret-pw", '
        'domain: $d) { id } }',
        e=email, d=world.da,
    )  # fmt: skip
    wrong = await world.gw.client.post(
        f"{world.gw.url}/graphql",
        json={"query": f'mutation {{ login(email: "{email}", password: "nope") {{ token }} }}'},
    )
    assert wrong.json()["errors"][0]["extensions"]["code"] == "bad-login"
    login = await world.gw.client.post(
        f"{world.gw.url}/graphql",
        json={
            "query": f'mutation {{ login(email: "{email}", password: "s3cret-pw") {{ token }} }}'
        },
    )
    token = login.json()["data"]["login"]["token"]
    bearer = {"Authorization": f"Bearer {token}"}
    viewer = await world.gw.client.post(
        f"{world.gw.url}/graphql", json={"query": "{ viewer { role } }"}, headers=bearer
    )
    assert viewer.json()["data"]["viewer"]["role"] == "user"
    await world.gw.client.post(
        f"{world.gw.url}/graphql", json={"query": "mutation { logout }"}, headers=bearer
    )
    after = await world.gw.client.post(
        f"{world.gw.url}/graphql", json={"query": "{ viewer { role } }"}, headers=bearer
    )
    assert (after.status_code, _code(after)) == (401, "bad-token")


async def test_bad_admin_input_is_refused_and_appends_nothing(bus: Bus, world: World) -> None:
    store = EventStore(bus)
    before = await store.stream_last_seq()
    missing = await world.gw.gql(
        'mutation { createUser(email: "x@example.org", password: "pw-123456", '
        'domain: "no-such-domain") { id } }'
    )
    assert "no-such-domain" in missing["errors"][0]["message"]
    negative = await world.gw.gql(
        'mutation { createResourcePolicy(kind: "keypair", name: "neg", '
        "keypair: {maxConcurrentSessions: -1}) { id } }"
    )
    assert "errors" in negative and "maxConcurrentSessions" in str(negative["errors"])
    email = f"dup-{new_id()[:6]}@example.org"
    create = (
        'mutation($e: String!, $d: String!) { createUser(email: $e, password: "pw-123456", '
        "domain: $d) { id } }"
    )
    await _ok(world.gw, create, e=email, d=world.da)
    middle = await store.stream_last_seq()
    duplicate = await world.gw.gql(create, e=email, d=world.da)
    assert duplicate["errors"][0]["extensions"]["code"] == "conflict"
    assert "already exists" in duplicate["errors"][0]["message"]
    assert before < middle == await store.stream_last_seq()


async def test_no_secret_key_is_anywhere_in_the_streams(bus: Bus, world: World) -> None:
    secrets = [p.secret_key for p in world.people.values()] + [world.gw.admin.secret_key]
    for stream in (EVENTS_STREAM, COMMANDS_STREAM, OUTCOMES_STREAM, ACCESS_STREAM):
        state = (await bus.js.stream_info(stream)).state
        seen = 0
        # Direct reads, one by one: a work queue (commands) allows no second consumer.
        for seq in range(state.first_seq, state.last_seq + 1):
            try:
                msg = await bus.js.get_msg(stream, seq, direct=True)
            except NotFoundError:
                continue  # acked from the work queue, or never there
            seen += 1
            for secret in secrets:
                assert secret.encode() not in (msg.data or b""), f"a secret key is in {stream}"
        assert seen or stream == COMMANDS_STREAM
