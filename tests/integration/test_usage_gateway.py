"""Usage reports through the real gateway app: the ``usage`` query and ``GET /usage.csv`` give
the same rows, byte for byte once the GraphQL answer is written as CSV, for every grouping and
for every caller; a user sees their own use, a domain admin their domain's, a superadmin all;
bad ranges and parameters are ``invalid`` on both; the CSV needs credentials like ``/graphql``.

The history is the unit table's (``tests/unit/usage_history.py``), owned by people made
through the API, with ids tagged for this module."""

from __future__ import annotations

import asyncio
import csv
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from events.bus import Bus
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.tenancy import SessionOwner
from services.gateway.usage.report import CSV_COLUMNS
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.unit.usage_history import END, Cast, at, known_history

USAGE = """query($from: DateTime!, $to: DateTime!, $g: UsageGroup!, $domain: String,
    $project: ID, $user: ID, $group: String) {
  usage(from: $from, to: $to, groupBy: $g, domain: $domain, projectId: $project,
        userId: $user, resourceGroup: $group) {
    from to groupBy
    rows { key name cpuCoreSeconds memoryGibSeconds gpuSeconds sessions
           gpuDeviceSeconds { node device seconds shareSeconds } }
  }
}"""
FROM, TO = at(0).isoformat(), at(END).isoformat()
GROUPS = ("SESSION", "USER", "PROJECT", "DOMAIN", "RESOURCE_GROUP")


@dataclass
class World:
    gw: Gateway
    cast: Cast
    auth: dict[str, JetyardAuth]
    emails: dict[str, str]


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async with running_gateway(bus, tmp_path_factory.mktemp("usage")) as gw:
        tag = f"-{new_id()[:8]}"
        d1, d2 = f"d1{tag}", f"d2{tag}"
        for domain, projects in ((d1, ("one", "two")), (d2, ("three",))):
            await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
            for project in projects:
                await gql_ok(
                    gw,
                    "mutation($d: String!, $p: String!) { createProject(domain: $d, name: $p) "
                    "{ id } }",
                    d=domain, p=project,
                )  # fmt: skip
        people: dict[str, SessionOwner] = {}
        auth: dict[str, JetyardAuth] = {}
        emails: dict[str, str] = {}
        for name, domain, project, role in (
            ("alice", d1, "one", "user"), ("bob", d1, "two", "user"),
            ("carol", d2, "three", "user"), ("admin", d1, "one", "admin"),
        ):  # fmt: skip
            people[name], auth[name], emails[name] = await person(gw, name, domain, project, role)
        auth["root"] = gw.root
        cast = Cast(people=people, tag=tag)
        store, guards = EventStore(bus), dict[AggregateRef, int]()
        for event in known_history(cast).events:
            env = event.envelope
            ref = AggregateRef(env.aggregate_type, env.aggregate_id)
            guards[ref] = (await store.append(Write(ref, guards.get(ref, 0), (env,)))).seqs[-1]
        for _ in range(400):  # the views hold the history
            if (await gw.client.get(f"{gw.url}/healthz")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        yield World(gw, cast, auth, emails)


async def graphql(world: World, who: str, group_by: str, **filters: Any) -> dict[str, Any]:
    body = await world.gw.gql(
        USAGE, auth=world.auth[who], **{"from": FROM, "to": TO, "g": group_by, **filters}
    )
    assert "errors" not in body, body
    report: dict[str, Any] = body["data"]["usage"]
    return report


async def csv_rows(world: World, who: str, group_by: str, **params: str) -> list[list[str]]:
    response = await world.gw.client.get(
        f"{world.gw.url}/usage.csv",
        params={"from": FROM, "to": TO, "groupBy": group_by.lower(), **params},
        auth=world.auth[who],
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    assert response.headers["content-disposition"].startswith("attachment; filename=")
    return list(csv.reader(io.StringIO(response.text)))


def as_csv(report: dict[str, Any]) -> list[list[str]]:
    """The GraphQL answer written as the CSV says it: floats as JSON and Python write them."""
    rows = [list(CSV_COLUMNS)]
    for row in report["rows"]:
        devices = ";".join(
            f"{d['node']}/{d['device']}:{d['seconds']!r}:{d['shareSeconds']!r}"
            for d in row["gpuDeviceSeconds"]
        )
        rows.append([
            row["key"], row["name"] or "", str(row["sessions"]), repr(row["cpuCoreSeconds"]),
            repr(row["memoryGibSeconds"]), repr(row["gpuSeconds"]), devices,
        ])  # fmt: skip
    return rows


@pytest.mark.parametrize("group_by", GROUPS)
async def test_the_csv_is_the_graphql_answer(world: World, group_by: str) -> None:
    for who, filters in (
        ("root", {}), ("root", {"domain": world.cast.key("d1")}), ("alice", {}), ("admin", {}),
    ):  # fmt: skip
        report = await graphql(world, who, group_by, **filters)
        assert report["groupBy"] == group_by and report["rows"], (who, filters)
        assert await csv_rows(world, who, group_by, **filters) == as_csv(report), (who, filters)


async def test_each_caller_sees_what_their_role_allows(world: World) -> None:
    cast, d1, d2 = world.cast, world.cast.key("d1"), world.cast.key("d2")
    mine = await graphql(world, "alice", "USER")
    assert [(r["key"], r["name"]) for r in mine["rows"]] == [
        (cast.key("alice"), world.emails["alice"])
    ]
    alice = mine["rows"][0]
    assert (alice["cpuCoreSeconds"], alice["gpuSeconds"], alice["sessions"]) == (300.0, 200.0, 2)
    assert {(d["device"], d["seconds"], d["shareSeconds"]) for d in alice["gpuDeviceSeconds"]} == {
        (cast.device("node-1", 0)[1], 100.0, 100.0), (cast.device("node-1", 1)[1], 200.0, 100.0),
    }  # fmt: skip
    assert (await graphql(world, "alice", "USER", user=cast.key("bob")))["rows"] == []
    assert (await graphql(world, "alice", "USER", domain=d2))["rows"] == []
    domain = await graphql(world, "admin", "USER")
    assert {r["key"] for r in domain["rows"]} == {cast.key("alice"), cast.key("bob")}
    assert (await graphql(world, "admin", "DOMAIN", domain=d2))["rows"] == []
    everything = await graphql(world, "root", "DOMAIN")
    by_key = {r["key"]: r for r in everything["rows"]}
    assert (by_key[d1]["cpuCoreSeconds"], by_key[d2]["cpuCoreSeconds"]) == (1230.0, 2496.0)
    project = await graphql(world, "root", "PROJECT", project="two", domain=d1)
    assert [(r["key"], r["name"]) for r in project["rows"]] == [(cast.key("project:bob"), "two")]
    sessions = await graphql(world, "root", "SESSION", user=cast.key("alice"))
    assert [r["name"] for r in sessions["rows"]] == ["train", "share"]  # s1, s2 by key


@pytest.mark.parametrize(
    ("start", "end", "says"),
    [
        (FROM, FROM, "to must be after from"),
        (TO, FROM, "to must be after from"),
        ("2025-01-01T00:00:00Z", "2026-01-03T00:00:00Z", "at most 366 days"),
        ("2026-03-01T00:00:00", TO, "has no time zone"),
    ],
)
async def test_bad_ranges_are_invalid_on_both(
    world: World, start: str, end: str, says: str
) -> None:
    variables: dict[str, Any] = {"from": start, "to": end, "g": "USER"}
    body = await world.gw.gql(USAGE, **variables)
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "invalid" and says in error["message"], error
    response = await world.gw.client.get(
        f"{world.gw.url}/usage.csv", params={"from": start, "to": end, "groupBy": "user"},
        auth=world.gw.root,
    )  # fmt: skip
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["extensions"]["code"] == "invalid" and says in error["message"], error


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"to": TO, "groupBy": "user"}, "from is required"),
        ({"from": FROM, "to": TO}, "groupBy is required"),
        ({"from": FROM, "to": TO, "groupBy": "team"}, "groupBy must be"),
        ({"from": FROM, "to": TO, "groupBy": "user", "colour": "red"}, "unknown parameter"),
        ({"from": "yesterday", "to": TO, "groupBy": "user"}, "not an ISO 8601 time"),
        ({"from": FROM, "to": TO, "groupBy": "user", "userId": "a b"}, "not a valid id"),
    ],
)
async def test_bad_csv_parameters_are_invalid(
    world: World, params: dict[str, str], says: str
) -> None:
    response = await world.gw.client.get(
        f"{world.gw.url}/usage.csv", params=params, auth=world.gw.root
    )
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error["extensions"]["code"] == "invalid" and says in error["message"], error


async def test_the_csv_needs_credentials(world: World) -> None:
    params = {"from": FROM, "to": TO, "groupBy": "user"}
    response = await world.gw.client.get(f"{world.gw.url}/usage.csv", params=params)
    assert response.status_code == 401
    assert response.json()["errors"][0]["extensions"]["code"] == "unauthenticated"
    resource_group = await csv_rows(
        world, "root", "RESOURCE_GROUP", resourceGroup=world.cast.id("gpu")
    )
    assert [row[:3] for row in resource_group] == [
        list(CSV_COLUMNS[:3]),
        [world.cast.id("gpu"), world.cast.id("gpu"), "2"],
    ]
