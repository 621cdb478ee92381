"""Fair share through the real gateway on the real log: shares given and changed with the admin
mutations (``fairShare`` on create/modify Domain, Project and User) are stored and shown; 0, a
negative share and 10001 are refused with a sentence naming ``fairShare``, nothing sent or
appended; and ``fairShare(resourceGroup:)`` lists a group's tree from the views (usage written
to the log, a waiting session, a node) with the shares and factors worked out by hand, each
caller seeing only their lines: a user their domain, their project and themselves, a domain
admin their domain, a superadmin everything; and ``jetyard admin user create --fair-share``
gives a new user a share."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from events.bus import Bus
from events.domain.node import NodeRegistered
from events.domain.session import SessionAdmitted
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.cli.main import main
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.subjects import COMMANDS_STREAM, AggregateType
from schemas.tenancy import SessionOwner, project_id_for
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.unit.usage_history import T0, Cast, History, slots

H = 31_622_400
"""The longest half-life (366 days): the seconds this test takes move no number it reads."""
LISTING = """query($g: String!) { fairShare(resourceGroup: $g) {
    level domain projectId userId share normalizedShare usage normalizedUsage factor } }"""
DOMAIN = "query($n: String!) { domain(name: $n) { fairShare } }"
PROJECTS = "query($d: String!) { projects(domain: $d) { id fairShare } }"
USER = "query($u: ID!) { user(id: $u) { fairShare } }"
CREATE_DOMAIN = "mutation($n: String!, $s: Int) { createDomain(name: $n, fairShare: $s) { id } }"
MODIFY_DOMAIN = """mutation($n: String!, $s: Int, $d: String) {
    modifyDomain(name: $n, fairShare: $s, description: $d) { id } }"""
CREATE_PROJECT = """mutation($d: String!, $n: String!, $s: Int) {
    createProject(domain: $d, name: $n, fairShare: $s) { id } }"""
MODIFY_PROJECT = "mutation($p: ID!, $s: Int) { modifyProject(id: $p, fairShare: $s) { id } }"
CREATE_USER = """mutation($e: String!, $d: String!, $p: [ID!], $s: Int) {
    createUser(email: $e, password: "pw-123456", domain: $d, role: "user", projects: $p,
               fairShare: $s) { id } }"""
MODIFY_USER = "mutation($u: ID!, $s: Int) { modifyUser(id: $u, fairShare: $s) { id } }"


@dataclass
class World:
    gw: Gateway
    tag: str
    group: str
    people: dict[str, SessionOwner]
    auth: dict[str, JetyardAuth]
    listed_at: float = 0.0

    @property
    def domains(self) -> tuple[str, str]:
        return f"fsa{self.tag}", f"fsb{self.tag}"


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    """Two domains (shares 3 and 1); alice (share 1) and bob (share 3) in one project of the
    first, carol in the second. A fair-share group with one node of four GPUs where only GPUs
    weigh: alice held two GPUs for an hour, ending an hour ago; carol one GPU for half an hour,
    ending then too; bob has a session waiting."""
    async with running_gateway(bus, tmp_path_factory.mktemp("fair-share")) as gw:
        tag = f"-{new_id()[:8]}"
        world = World(gw, tag, f"fs{tag}", {}, {})
        first, second = world.domains
        await gql_ok(gw, CREATE_DOMAIN, n=first, s=3)
        await gql_ok(gw, CREATE_DOMAIN, n=second)
        await gql_ok(gw, CREATE_PROJECT, d=first, n="vision", s=2)
        await gql_ok(gw, CREATE_PROJECT, d=second, n="speech")
        for name, domain, project, role in (
            ("alice", first, "vision", "user"), ("bob", first, "vision", "user"),
            ("carol", second, "speech", "user"), ("admin", first, "vision", "admin"),
        ):  # fmt: skip
            world.people[name], world.auth[name], _ = await person(gw, name, domain, project, role)
        await gql_ok(gw, MODIFY_USER, u=world.people["bob"].user_id, s=3)
        await gql_ok(
            gw,
            """mutation($n: String!) { createResourceGroup(name: $n, queuePolicy: "fair-share",
                usageHalfLifeSeconds: 31622400, gpuUsageWeight: 10, cpuUsageWeight: 0,
                memoryUsageWeight: 0) { status } }""",
            n=world.group,
        )
        await _history(bus, world)
        for _ in range(400):  # the views hold the history
            if len((await gql_ok(gw, LISTING, g=world.group))["fairShare"]) == 7:
                break
            await asyncio.sleep(0.05)
        yield world


def ago(seconds: float) -> float:
    """``History``'s time (seconds after its T0) ``seconds`` before now."""
    return (datetime.now(UTC) - T0).total_seconds() - seconds


async def _history(bus: Bus, world: World) -> None:
    cast = Cast(people=world.people, tag=world.tag)
    h = History(cast)
    four = ResourceSlots.of(cpu="16", memory=64 << 30, gpu="4")
    registered = NodeRegistered(hostname="n1", resource_group=world.group, capacity=four)
    h.add(AggregateType.NODE, "n1", ago(7300), registered)
    h.request("sa", "alice", ["ka"], ago(7300), group="fs")
    h.allocate("n1", "ka", "sa", slots("1", 1, "2"), ago(7200))
    h.released("n1", "ka", ago(3600), "kernel exited")
    h.request("sc", "carol", ["kc"], ago(5500), group="fs")
    h.allocate("n1", "kc", "sc", slots("1", 1, "1"), ago(5400))
    h.released("n1", "kc", ago(3600), "kernel exited")
    h.request("sb", "bob", ["kb"], ago(60), group="fs")
    h.add(AggregateType.SESSION, "sb", ago(60), SessionAdmitted())
    store, guards = EventStore(bus), dict[AggregateRef, int]()
    for event in h.events:
        env = event.envelope
        ref = AggregateRef(env.aggregate_type, env.aggregate_id)
        guards[ref] = (await store.append(Write(ref, guards.get(ref, 0), (env,)))).seqs[-1]


def decayed_use(rate: float, held: float, since_end: float) -> float:
    """Holding ``rate`` (weight per second) for ``held`` seconds, ``since_end`` seconds ago,
    decayed by the half-life: the integral of rate x 2^(-age/H)."""
    return rate * H / math.log(2) * (1 - 2 ** (-held / H)) * 2 ** (-since_end / H)


def row_of(found: dict[str, Any]) -> tuple[str, str, str | None, str | None]:
    return (found["level"], found["domain"], found["projectId"], found["userId"])


async def test_the_listing_gives_the_tree_worked_out_by_hand(world: World) -> None:
    rows = (await gql_ok(world.gw, LISTING, g=world.group))["fairShare"]
    first, second = world.domains
    alice, bob, carol = (world.people[n] for n in ("alice", "bob", "carol"))
    vision, speech = project_id_for(first, "vision"), project_id_for(second, "speech")
    users = sorted((alice, bob), key=lambda o: o.user_id)
    assert [row_of(r) for r in rows] == [
        ("domain", first, None, None),
        ("project", first, vision, None),
        *(("user", first, vision, o.user_id) for o in users),
        ("domain", second, None, None),
        ("project", second, speech, None),
        ("user", second, speech, carol.user_id),
    ]
    by = {(r["level"], r["userId"] or r["projectId"] or r["domain"]): r for r in rows}
    # Only GPUs weigh 10: the group's four held forever is 40 x H/ln2. Alice: two GPUs (20 a
    # second) for an hour, an hour ago; carol: one (10) for half an hour, an hour ago.
    norm = 40 * H / math.log(2)
    used_a, used_c = decayed_use(20, 3600, 3600), decayed_use(10, 1800, 3600)
    # Shares: the first domain 3 of 3 + 1; its one active project all of it; alice 1 and bob
    # 3 of their project's 4. The second domain, its project and carol: 1/4.
    expected = {
        ("domain", first): (3, 3 / 4, used_a),
        ("project", vision): (2, 3 / 4, used_a),
        ("user", alice.user_id): (1, 3 / 16, used_a),
        ("user", bob.user_id): (3, 9 / 16, 0.0),
        ("domain", second): (1, 1 / 4, used_c),
        ("project", speech): (1, 1 / 4, used_c),
        ("user", carol.user_id): (1, 1 / 4, used_c),
    }
    for key, (share, normalized, usage) in expected.items():
        row = by[key]
        assert (row["share"], row["normalizedShare"]) == (share, pytest.approx(normalized)), key
        assert row["usage"] == pytest.approx(usage, rel=1e-5), key
        assert row["normalizedUsage"] == pytest.approx(usage / norm, rel=1e-5), key
        assert row["factor"] == pytest.approx(2 ** (-usage / norm / normalized), rel=1e-6), key
    assert by[("user", bob.user_id)]["factor"] == 1.0  # waiting, nothing used: active at 1
    # Alice used twice carol's GPU-time at a smaller share: the lowest factor of all.
    assert min(rows, key=lambda r: r["factor"])["userId"] == alice.user_id


@pytest.mark.parametrize(
    ("caller", "sees"),
    [
        ("alice", {("domain", 0), ("project", 0), ("user", "alice")}),
        ("carol", {("domain", 1), ("project", 1), ("user", "carol")}),
        ("admin", {("domain", 0), ("project", 0), ("user", "alice"), ("user", "bob")}),
    ],
)
async def test_each_caller_sees_only_their_lines(
    world: World, caller: str, sees: set[tuple[str, Any]]
) -> None:
    body = await world.gw.gql(LISTING, auth=world.auth[caller], g=world.group)
    assert "errors" not in body, body
    domains, projects = world.domains, ("vision", "speech")

    def key(level: str, which: Any) -> tuple[str, str, str | None, str | None]:
        if level == "user":
            o = world.people[which]
            return (level, o.domain, o.project_id, o.user_id)
        domain = domains[which]
        project = project_id_for(domain, projects[which]) if level == "project" else None
        return (level, domain, project, None)

    assert {row_of(r) for r in body["data"]["fairShare"]} == {key(*s) for s in sees}


async def test_shares_are_stored_at_creation_and_changed_one_at_a_time(world: World) -> None:
    gw, first, domain = world.gw, world.domains[0], f"fsc{world.tag}"
    # The fixture's shares, as the admin queries show them.
    assert (await gql_ok(gw, DOMAIN, n=first))["domain"]["fairShare"] == 3
    assert (await gql_ok(gw, DOMAIN, n=world.domains[1]))["domain"]["fairShare"] == 1
    shown = (await gql_ok(gw, PROJECTS, d=first))["projects"]
    assert shown == [{"id": project_id_for(first, "vision"), "fairShare": 2}]
    for name, share in (("alice", 1), ("bob", 3)):
        user = (await gql_ok(gw, USER, u=world.people[name].user_id))["user"]
        assert user["fairShare"] == share, name
    # A domain, project and user of this test's own, given shares and changed.
    await gql_ok(gw, CREATE_DOMAIN, n=domain, s=10_000)
    project = (await gql_ok(gw, CREATE_PROJECT, d=domain, n="p", s=1))["createProject"]["id"]
    email = f"dora-{new_id()[:6]}@example.org"
    user = (await gql_ok(gw, CREATE_USER, e=email, d=domain, p=[project], s=4))["createUser"]
    assert (await gql_ok(gw, DOMAIN, n=domain))["domain"]["fairShare"] == 10_000
    assert (await gql_ok(gw, USER, u=user["id"]))["user"]["fairShare"] == 4
    await gql_ok(gw, MODIFY_DOMAIN, n=domain, s=5)
    await gql_ok(gw, MODIFY_DOMAIN, n=domain, d="left out: the share is kept")
    await gql_ok(gw, MODIFY_PROJECT, p=project, s=6)
    await gql_ok(gw, MODIFY_USER, u=user["id"], s=7)
    await gql_ok(gw, MODIFY_USER, u=user["id"])
    assert (await gql_ok(gw, DOMAIN, n=domain))["domain"]["fairShare"] == 5
    assert (await gql_ok(gw, PROJECTS, d=domain))["projects"] == [{"id": project, "fairShare": 6}]
    assert (await gql_ok(gw, USER, u=user["id"]))["user"]["fairShare"] == 7
    assert gw.services.directory.fair_share("project", project) == 6  # what the scheduler reads


@pytest.mark.parametrize("bad", [0, -1, 10_001])
async def test_a_share_out_of_bounds_is_refused_and_nothing_sent_or_appended(
    bus: Bus, world: World, bad: int
) -> None:
    gw, first = world.gw, world.domains[0]
    vision, bob = project_id_for(first, "vision"), world.people["bob"].user_id
    new = f"fsx{world.tag}-{-bad}"
    store = EventStore(bus)
    events_before = await store.stream_last_seq()
    commands_before = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    email = f"eve-{new_id()[:6]}@example.org"
    asked: list[tuple[str, dict[str, Any]]] = [
        (CREATE_DOMAIN, {"n": new}),
        (MODIFY_DOMAIN, {"n": first}),
        (CREATE_PROJECT, {"d": first, "n": "refused"}),
        (MODIFY_PROJECT, {"p": vision}),
        (CREATE_USER, {"e": email, "d": first, "p": [vision]}),
        (MODIFY_USER, {"u": bob}),
    ]
    for query, variables in asked:
        body = await gw.gql(query, s=bad, **variables)
        error = body["errors"][0]
        assert error["message"] == f"fairShare must be 1 to 10000, got {bad}", (query, body)
        assert error["extensions"]["code"] == "invalid", body
    assert await store.stream_last_seq() == events_before
    assert (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq == commands_before
    assert (await gql_ok(gw, DOMAIN, n=new))["domain"] is None
    assert (await gql_ok(gw, DOMAIN, n=first))["domain"]["fairShare"] == 3
    assert [p["id"] for p in (await gql_ok(gw, PROJECTS, d=first))["projects"]] == [vision]
    assert (await gql_ok(gw, USER, u=bob))["user"]["fairShare"] == 3


async def test_a_user_or_a_domain_admin_cannot_change_what_is_not_theirs(world: World) -> None:
    gw, first = world.gw, world.domains[0]
    alice, admin = world.auth["alice"], world.auth["admin"]
    alice_id = world.people["alice"].user_id
    refused = [
        (alice, MODIFY_USER, {"u": alice_id, "s": 10_000}),
        (alice, MODIFY_DOMAIN, {"n": first, "s": 10_000}),
        (alice, MODIFY_PROJECT, {"p": project_id_for(first, "vision"), "s": 10_000}),
        (admin, MODIFY_DOMAIN, {"n": first, "s": 10_000}),  # a domain is the superadmin's
    ]
    for auth, query, variables in refused:
        body = await gw.gql(query, auth=auth, **variables)
        assert body["errors"][0]["extensions"]["code"] == "forbidden", (query, body)
    assert (await gql_ok(gw, USER, u=alice_id))["user"]["fairShare"] == 1
    assert (await gql_ok(gw, DOMAIN, n=first))["domain"]["fairShare"] == 3
    shown = (await gql_ok(gw, PROJECTS, d=first))["projects"]
    assert shown == [{"id": project_id_for(first, "vision"), "fairShare": 2}]


async def test_the_admin_command_line_gives_a_new_user_a_share(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    gw, first = world.gw, world.domains[0]
    email = f"fay-{new_id()[:6]}@example.org"
    signed_in = ("--endpoint", gw.url, "--access-key", gw.admin.access_key,
                 "--secret-key", gw.admin.secret_key)  # fmt: skip
    argv = ["admin", *signed_in, "user", "create", email, "--project", "vision",
            "--domain", first, "--fair-share", "9", "--json"]  # fmt: skip
    assert await asyncio.to_thread(main, argv) == 0
    made = json.loads(capsys.readouterr().out)
    assert (made["email"], made["domain"]) == (email, first)
    assert (await gql_ok(gw, USER, u=made["user_id"]))["user"]["fairShare"] == 9
