"""``eventLog`` through the real gateway app on a real log: a session's, node's or agent's
events a page at a time, by name, env values hidden, and who may read which."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.operator_gateway.support import (
    World,
)

LOG = """query($a: String!, $id: ID!, $after: Int!, $first: Int!, $names: [String!]) {
  eventLog(aggregate: $a, id: $id, after: $after, first: $first, names: $names) {
    aggregate id nextAfter hasMore lastSeq
    events { seq name version actor eventId payload } } }"""


async def log_of(
    world: World, who: str, aggregate: str, name: str, **variables: Any
) -> dict[str, Any]:
    asked = {"a": aggregate, "id": world.cast.id(name), "after": 0, "first": 50, **variables}
    return await world.gw.gql(LOG, auth=world.auth[who], **asked)


async def test_a_session_s_events_come_a_page_at_a_time_with_env_values_hidden(
    world: World,
) -> None:
    whole = (await log_of(world, "root", "session", "s1"))["data"]["eventLog"]
    assert [e["name"] for e in whole["events"]] == ["SessionRequested", "SessionStarted"]
    assert [e["version"] for e in whole["events"]] == [1, 2]
    assert (whole["hasMore"], whole["lastSeq"]) == (False, whole["events"][-1]["seq"])
    requested = whole["events"][0]
    assert requested["actor"] == "service:tests"
    assert requested["payload"]["spec"]["env"] == {"TOKEN": "(hidden)"}
    assert requested["payload"]["owner"]["user_id"] == world.cast.key("alice")

    first = (await log_of(world, "root", "session", "s1", first=1))["data"]["eventLog"]
    assert [e["name"] for e in first["events"]] == ["SessionRequested"] and first["hasMore"]
    after = first["nextAfter"]
    rest = (await log_of(world, "root", "session", "s1", after=after))["data"]["eventLog"]
    assert [e["name"] for e in rest["events"]] == ["SessionStarted"] and not rest["hasMore"]


async def test_a_node_s_and_an_agent_s_events_filter_by_name(world: World) -> None:
    node = (await log_of(world, "root", "node", "gpu-a"))["data"]["eventLog"]
    assert [e["name"] for e in node["events"]] == [
        "NodeRegistered", "ResourcesAllocated", "ResourcesAllocated",
    ]  # fmt: skip
    only = await log_of(world, "root", "agent", "gpu-a", names=["KernelStarted"])
    started = only["data"]["eventLog"]["events"]
    assert [e["payload"]["session_id"] for e in started] == [
        world.cast.id("s1"), world.cast.id("s2"),
    ]  # fmt: skip
    none = await log_of(world, "root", "session", "no-such-session")
    assert none["data"]["eventLog"] == {
        "aggregate": "session", "id": world.cast.id("no-such-session"), "nextAfter": 0,
        "hasMore": False, "lastSeq": 0, "events": [],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("who", "aggregate", "name", "code"),
    [
        ("admin", "session", "s1", None),
        ("admin", "session", "s2", "not-found"),  # another domain's: as if none
        ("admin", "node", "gpu-a", "forbidden"),
        ("monitor", "session", "s1", "forbidden"),
        ("alice", "session", "s1", "forbidden"),
        ("root", "user", "s1", "invalid"),
    ],
)
async def test_who_may_read_which_log(
    world: World, who: str, aggregate: str, name: str, code: str | None
) -> None:
    body = await log_of(world, who, aggregate, name)
    if code is None:
        assert "errors" not in body, body
    else:
        assert body["errors"][0]["extensions"]["code"] == code, body


@pytest.mark.parametrize(
    "variables",
    [{"first": 0}, {"first": 501}, {"after": -1}, {"id": "not an id!"}, {"names": ["a b"]}],
)
async def test_bad_arguments_are_invalid(world: World, variables: dict[str, Any]) -> None:
    body = await log_of(world, "root", "session", "s1", **variables)
    assert body["errors"][0]["extensions"]["code"] == "invalid", body
