"""The operators' queries through the real gateway app on a real log: ``cluster`` (who holds each
GPU, the queue, why a waiting request does not fit, another domain's sessions unnamed; only
the lists asked worked out, a node's rows alone, one caller's picture never another's),
``eventLog`` (a session's, node's or agent's events a page at a time, by name, env values
hidden, who may read which) and the ``clusterChanges`` feed (a tick naming a node once the
views hold its change).

The history is written straight to the log: one node of four GPUs in a resource group of this
module's own, 0.6 of GPU 0 held by alice's session, 0.6 of GPU 1 by carol's (another domain),
and alice's 2.6-GPU request waiting: 2.8 GPUs are free, but 2.6 as shares needs three GPUs
with 2.6 free between them (1 + 1 + 0.4)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from events.bus import Bus
from events.catalogue import Event
from events.domain.agent import AgentRegistered, KernelStarted
from events.domain.node import NodeRegistered, ResourcesAllocated
from events.domain.session import SessionRequested, SessionStarted
from events.queues import QueueBoard
from events.store import EventStore
from events.writes import AggregateRef, Write
from jetyard.sdk import JetyardAuth
from jetyard.sdk_base import JetyardError
from jetyard.sdk_ws import subscribe
from schemas.devices import DeviceInfo, DeviceShare
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.gateway.cluster_picture import Picture
from services.gateway.cluster_queries import Snapshot, pictures
from services.gateway.cluster_subscription import ClusterChange, cluster_changes
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.integration.test_usage import write
from tests.unit.usage_history import GIB, Cast, History

CLUSTER = """{ cluster {
  seq
  nodes { id hostname resourceGroup state }
  devices { nodeId index uuid usedHundredths }
  holds { nodeId index sessionId sessionName user hundredths whole }
  kernels { nodeId sessionId kernelId user started resources { gpu } }
  queues { resourceGroup length }
  waiting { resourceGroup sessionId name user position perKernel { gpu } reason }
  notes { sessionId resourceGroup kind text freeGpu needGpu }
} }"""
LOG = """query($a: String!, $id: ID!, $after: Int!, $first: Int!, $names: [String!]) {
  eventLog(aggregate: $a, id: $id, after: $after, first: $first, names: $names) {
    aggregate id nextAfter hasMore lastSeq
    events { seq name version actor eventId payload } } }"""


@dataclass
class World:
    gw: Gateway
    cast: Cast
    auth: dict[str, JetyardAuth]
    emails: dict[str, str]
    node: str
    group: str


def _gpus(node: str) -> tuple[DeviceInfo, ...]:
    return tuple(
        DeviceInfo(kind="cuda", index=i, uuid=f"GPU-{node}-{i}", name="test GPU", memory_bytes=GIB)
        for i in range(4)
    )


def _history(cast: Cast, node: str, group: str) -> History:
    h = History(cast)
    capacity = ResourceSlots.of(cpu="8", memory=64 * GIB, gpu="4")
    h.add(AggregateType.NODE, "gpu-a", 0, NodeRegistered(
        hostname=node, resource_group=group, capacity=capacity, devices=_gpus(node),
    ))  # fmt: skip
    h.add(AggregateType.AGENT, "gpu-a", 0, AgentRegistered(
        epoch=1, hostname=node, backend="simulated", capacity=capacity, devices=_gpus(node),
        resource_group=group,
    ))  # fmt: skip

    def request(sid: str, who: str, gpu: str, name: str, env: dict[str, str]) -> None:
        spec = SessionSpec(
            image="busybox", resource_group=group, name=name, env=env,
            kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1", memory=GIB, gpu=gpu)),),
        )  # fmt: skip
        event = SessionRequested(
            spec=spec, kernel_ids=(cast.id(f"k-{sid}"),), owner=cast.people[who]
        )
        h.add(AggregateType.SESSION, sid, 1, event)

    def hold(sid: str, index: int) -> None:
        held = ResourceSlots.of(cpu="1", memory=GIB, gpu="0.6")
        share = DeviceShare(index=index, uuid=f"GPU-{node}-{index}", hundredths=60)
        allocated: Event = ResourcesAllocated(
            kernel_id=cast.id(f"k-{sid}"), session_id=cast.id(sid), slots=held, devices=(share,)
        )
        h.add(AggregateType.NODE, "gpu-a", 2, allocated)
        started = KernelStarted(
            kernel_id=cast.id(f"k-{sid}"), session_id=cast.id(sid), container_id="c"
        )
        h.add(AggregateType.AGENT, "gpu-a", 3, started)
        h.add(AggregateType.SESSION, sid, 3, SessionStarted(reason="kernel started"))

    request("s1", "alice", "0.6", "sixty", {"TOKEN": "s3cret"})
    hold("s1", 0)
    request("s2", "carol", "0.6", "theirs", {})
    hold("s2", 1)
    request("s3", "alice", "2.6", "big-share", {})
    return h


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async with running_gateway(bus, tmp_path_factory.mktemp("operator")) as gw:
        tag = f"-{new_id()[:8]}"
        d1, d2 = f"d1{tag}", f"d2{tag}"
        for domain, project in ((d1, "one"), (d2, "three")):
            await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
            await gql_ok(
                gw,
                "mutation($d: String!, $p: String!) { createProject(domain: $d, name: $p) { id } }",
                d=domain, p=project,
            )  # fmt: skip
        people: dict[str, SessionOwner] = {}
        auth: dict[str, JetyardAuth] = {"root": gw.root}
        emails: dict[str, str] = {}
        for name, domain, project, role in (
            ("alice", d1, "one", "user"), ("admin", d1, "one", "admin"),
            ("monitor", d1, "one", "monitor"), ("carol", d2, "three", "user"),
        ):  # fmt: skip
            people[name], auth[name], emails[name] = await person(gw, name, domain, project, role)
        cast = Cast(people=people, tag=tag)
        node, group = f"host{tag}", f"g{tag}"
        await write(EventStore(bus), _history(cast, node, group).events, {})
        await QueueBoard.on(bus).publish(group, [cast.id("s3")], 1)
        for _ in range(400):  # the views hold the history, the board the queue
            healthy = (await gw.client.get(f"{gw.url}/healthz")).status_code == 200
            if healthy and gw.services.queues.position(cast.id("s3")) is not None:
                break
            await asyncio.sleep(0.05)
        yield World(gw, cast, auth, emails, node, group)


async def cluster_as(world: World, who: str) -> dict[str, Any]:
    found: dict[str, Any] = (await world.gw.gql(CLUSTER, auth=world.auth[who]))["data"]["cluster"]
    return found


def mine(world: World, answer: dict[str, Any], key: str) -> list[dict[str, Any]]:
    node_id = world.cast.id("gpu-a")
    return [row for row in answer[key] if row.get("nodeId", node_id) == node_id]


async def test_the_cluster_says_who_holds_each_gpu_and_why_the_request_cannot_fit(
    world: World,
) -> None:
    cast, answer = world.cast, await cluster_as(world, "root")
    (node,) = [n for n in answer["nodes"] if n["id"] == cast.id("gpu-a")]
    assert (node["hostname"], node["resourceGroup"], node["state"]) == (
        world.node, world.group, "schedulable",
    )  # fmt: skip
    assert [(d["index"], d["usedHundredths"]) for d in mine(world, answer, "devices")] == [
        (0, 60), (1, 60), (2, 0), (3, 0),
    ]  # fmt: skip
    holds = [(h["index"], h["sessionName"], h["user"], h["hundredths"], h["whole"])
             for h in mine(world, answer, "holds")]  # fmt: skip
    assert holds == [
        (0, "sixty", world.emails["alice"], 60, False),
        (1, "theirs", world.emails["carol"], 60, False),
    ]
    kernels = mine(world, answer, "kernels")
    assert {(k["sessionId"], k["started"], k["resources"]["gpu"]) for k in kernels} == {
        (cast.id("s1"), True, "0.6"), (cast.id("s2"), True, "0.6"),
    }  # fmt: skip
    assert {"resourceGroup": world.group, "length": 1} in answer["queues"]
    (waiting,) = [w for w in answer["waiting"] if w["resourceGroup"] == world.group]
    assert (waiting["sessionId"], waiting["position"], waiting["perKernel"]["gpu"]) == (
        cast.id("s3"), 1, "2.6",
    )  # fmt: skip
    (note,) = [n for n in answer["notes"] if n["sessionId"] == cast.id("s3")]
    assert (note["kind"], note["freeGpu"], note["needGpu"]) == ("fragmented", "2.8", "2.6")
    assert note["text"] == (
        f"2.8 GPUs are free in group {world.group}, but no node has 2.6 free on 3 GPUs: "
        f"{world.node} has 2 whole GPUs free and 0.4 + 0.4 of shared GPUs "
        f"(GPU 0: 0.6 held by session sixty of {world.emails['alice']}; "
        f"GPU 1: 0.6 held by session theirs of {world.emails['carol']}). "
        f"The waiting 2.6-GPU request of session big-share of {world.emails['alice']} "
        "(1st of 1 waiting) cannot fit."
    )


async def test_a_domain_s_operators_see_another_domain_s_sessions_unnamed(world: World) -> None:
    cast = world.cast
    for who, alice in (("admin", world.emails["alice"]), ("monitor", cast.key("alice"))):
        answer = await cluster_as(world, who)
        holds = [(h["index"], h["sessionId"], h["user"]) for h in mine(world, answer, "holds")]
        assert holds == [(0, cast.id("s1"), alice), (1, None, None)], who
        kernels = mine(world, answer, "kernels")
        assert sorted(str(k["sessionId"]) for k in kernels) == sorted([cast.id("s1"), "None"])
        (note,) = [n for n in answer["notes"] if n["sessionId"] == cast.id("s3")]
        assert "GPU 1: 0.6 held by a session of another domain" in note["text"], who
        assert "theirs" not in note["text"]


async def test_a_user_may_not_see_the_cluster(world: World) -> None:
    body = await world.gw.gql(CLUSTER, auth=world.auth["alice"])
    assert body["errors"][0]["extensions"]["code"] == "forbidden"


def snapshots(world: World) -> list[Snapshot]:
    return [snapshot for _, snapshot in pictures(world.gw.services.views).entries.values()]


@pytest.mark.parametrize(
    ("query", "made"),
    [
        ("{ cluster { seq } }", set()),  # no view read beyond the position
        ("{ cluster { nodes { id } } }", {"node views", "nodes"}),  # no kernel, queue, note
        ("{ cluster { devices { index } holds { index } } }", {"node views", "holding"}),
        ("{ cluster { gpuMap } }", {"node views", "holding"}),
        # A few nodes named by two fields: read once for both.
        (
            '{ cluster { nodes(nodeIds: ["n1", "n2"]) { id } gpuMap(nodeIds: ["n2", "n1"]) } }',
            {"named node views", "holding"},
        ),
        ("{ cluster { waiting { sessionId } } }", {"queues"}),  # no node
        (
            "{ cluster { notes { sessionId } } }",
            {"queues", "node views", "holding", "rooms", "notes"},
        ),
    ],
)
async def test_only_the_lists_asked_are_worked_out(
    world: World, query: str, made: set[str]
) -> None:
    forget(world)
    body = await world.gw.gql(query, auth=world.gw.root)
    assert "errors" not in body, body
    (asked,) = snapshots(world)
    assert set(asked.made) == made
    assert len(asked.made) == len(made)  # each part once


def forget(world: World) -> None:
    """No picture kept, nor any caller's node rows."""
    kept = pictures(world.gw.services.views)
    kept.entries.clear()
    kept.rows.clear()


T = TypeVar("T")


def yielding(build: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    async def built(*args: Any) -> T:
        await asyncio.sleep(0)
        return await build(*args)

    return built


async def test_a_new_picture_builds_only_the_nodes_that_changed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    forget(world)
    query = "{ cluster { seq nodes { id } gpuMap kernels { nodeId } notes { kind } } }"
    first = await world.gw.gql(query, auth=world.gw.root)
    (built,) = snapshots(world)
    nodes = len(first["data"]["cluster"]["nodes"])
    assert built.built == 3 * nodes  # GPUs and holds, kernels, room: once per node each
    pictures(world.gw.services.views).entries.clear()  # as at a later log position
    again = await world.gw.gql(query, auth=world.gw.root)
    (reused,) = snapshots(world)
    assert reused is not built and reused.built == 0
    assert again["data"] == first["data"]

    # Two answers at once, their resolvers interleaved at every row (an owner's email may
    # take a read of the people vault): still one build a row.
    for name in ("gpus", "kernels", "room"):
        monkeypatch.setattr(Picture, name, yielding(getattr(Picture, name)))
    forget(world)
    both = await asyncio.gather(*(world.gw.gql(query, auth=world.gw.root) for _ in range(2)))
    assert [b["data"] for b in both] == [first["data"]] * 2
    assert sum(s.built for s in snapshots(world)) == 3 * nodes


async def test_the_gpu_map_is_the_devices_and_holds_in_one_value(world: World) -> None:
    query = """query($ids: [ID!]) { cluster {
      nodes(nodeIds: $ids) { id hostname }
      gpuMap(nodeIds: $ids)
      devices(nodeIds: $ids) { nodeId index uuid name memoryBytes numaNode mig usedHundredths }
      holds(nodeIds: $ids) { nodeId index sessionId sessionName kernelId user hundredths whole }
    } }"""
    every = (await world.gw.gql(query, auth=world.auth["admin"]))["data"]["cluster"]
    assert set(every["gpuMap"]) == {n["id"] for n in every["nodes"]}
    drawn = [
        ({"nodeId": node, **{k: v for k, v in gpu.items() if k != "holds"}}, gpu["holds"])
        for node, gpus in every["gpuMap"].items()
        for gpu in gpus
    ]
    assert sorted((d for d, _ in drawn), key=repr) == sorted(every["devices"], key=repr)
    holds = [{"nodeId": d["nodeId"], "index": d["index"], **h} for d, hs in drawn for h in hs]
    assert sorted(holds, key=repr) == sorted(every["holds"], key=repr)
    assert any(h["sessionId"] is None for h in holds)  # another domain's, unnamed here too
    node = world.cast.id("gpu-a")
    alone = (await world.gw.gql(query, auth=world.auth["admin"], ids=[node]))["data"]["cluster"]
    assert [n["id"] for n in alone["nodes"]] == [node]
    assert list(alone["gpuMap"]) == [node]
    assert alone["gpuMap"][node] == every["gpuMap"][node]


async def test_the_fields_of_one_answer_share_one_picture(world: World) -> None:
    forget(world)
    query = """{ cluster {
      nodes { id } devices { index } holds { index } kernels { nodeId } notes { kind } } }"""
    body = await world.gw.gql(query, auth=world.gw.root)
    assert {"kind": "fragmented"} in body["data"]["cluster"]["notes"]
    (asked,) = snapshots(world)
    assert sorted(asked.made) == ["holding", "node views", "nodes", "notes", "queues", "rooms"]
    nodes = len(body["data"]["cluster"]["nodes"])
    assert asked.built == 3 * nodes  # each node's GPUs, kernels and room once


async def test_a_node_s_rows_come_alone(world: World) -> None:
    node = world.cast.id("gpu-a")
    query = """query($ids: [ID!]) { cluster {
      devices(nodeIds: $ids) { nodeId index } holds(nodeIds: $ids) { nodeId sessionName }
      kernels(nodeIds: $ids) { nodeId sessionId } } }"""
    every = await cluster_as(world, "root")
    alone = (await world.gw.gql(query, auth=world.gw.root, ids=[node]))["data"]["cluster"]
    assert [(d["nodeId"], d["index"]) for d in alone["devices"]] == [(node, i) for i in range(4)]
    assert [h["sessionName"] for h in alone["holds"]] == ["sixty", "theirs"]
    assert {h["nodeId"] for h in alone["holds"] + alone["kernels"]} == {node}
    assert sorted(k["sessionId"] for k in alone["kernels"]) == sorted(
        k["sessionId"] for k in mine(world, every, "kernels")
    )
    none = (await world.gw.gql(query, auth=world.gw.root, ids=[]))["data"]["cluster"]
    assert none == {"devices": [], "holds": [], "kernels": []}
    unknown = await world.gw.gql(query, auth=world.gw.root, ids=["no-such-node"])
    assert unknown["data"]["cluster"] == {"devices": [], "holds": [], "kernels": []}


async def test_a_long_list_of_node_ids_is_answered_like_a_short_one(world: World) -> None:
    # Each id read by id is a query parameter (PostgreSQL's driver takes at most 32,767): a
    # long list is picked from every node's views instead.
    node = world.cast.id("gpu-a")
    query = """query($ids: [ID!]) { cluster {
      nodes(nodeIds: $ids) { id } gpuMap(nodeIds: $ids) holds(nodeIds: $ids) { sessionName } } }"""
    ids = [f"no-such-node-{i}" for i in range(40_000)] + [node]
    body = await world.gw.gql(query, auth=world.gw.root, ids=ids)
    assert "errors" not in body, body["errors"][:1]
    answer = body["data"]["cluster"]
    assert [n["id"] for n in answer["nodes"]] == [node] and list(answer["gpuMap"]) == [node]
    assert [h["sessionName"] for h in answer["holds"]] == ["sixty", "theirs"]


async def test_one_caller_s_picture_is_never_another_s(world: World) -> None:
    pictures(world.gw.services.views).entries.clear()
    cast, asked = world.cast, set()
    query = "query($ids: [ID!]) { cluster { seq holds(nodeIds: $ids) { index sessionId user } } }"

    async def holders(who: str) -> list[tuple[str | None, str | None]]:
        body = await world.gw.gql(query, auth=world.auth[who], ids=[cast.id("gpu-a")])
        asked.add((body["data"]["cluster"]["seq"], who))
        return [(h["sessionId"], h["user"]) for h in body["data"]["cluster"]["holds"]]

    # In turn at one log position: each sees what it may, whoever asked before.
    alice, carol = (cast.id("s1"), world.emails["alice"]), (cast.id("s2"), world.emails["carol"])
    assert await holders("root") == [alice, carol]
    assert await holders("admin") == [alice, (None, None)]
    assert await holders("monitor") == [(cast.id("s1"), cast.key("alice")), (None, None)]
    assert await holders("root") == [alice, carol]
    assert len(snapshots(world)) == len(asked) == 3  # root's, the admin's, the monitor's


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


TICKS = "subscription($every: Int!) { clusterChanges(everyMs: $every) { seq nodeIds } }"


@pytest.mark.parametrize("every", [0, 49, 60_001, -1])
async def test_ticks_closer_or_further_apart_than_allowed_are_refused(
    world: World, every: int
) -> None:
    with pytest.raises(JetyardError, match=f"everyMs must be between 50 and 60000, got {every}"):
        async for _ in subscribe(world.gw.url, world.gw.root, TICKS, {"every": every}):
            pass


async def test_the_feed_ticks_with_the_node_once_the_views_hold_its_change(
    world: World, bus: Bus
) -> None:
    services = world.gw.services
    ticks = cluster_changes(bus, services.queues, services.views, poll_s=0.2)
    # A node of its own in a group of its own: the other tests' answers stay as they were.
    node_id, group = world.cast.id("gpu-b"), f"{world.group}-b"

    async def next_tick() -> ClusterChange:
        return await anext(ticks)

    first = asyncio.create_task(next_tick())
    try:
        await asyncio.sleep(0.5)  # the feed reads from the log's end: start it first
        joined = History(world.cast)
        capacity = ResourceSlots.of(cpu="2", memory=GIB)
        registered = NodeRegistered(hostname=node_id, resource_group=group, capacity=capacity)
        joined.add(AggregateType.NODE, "gpu-b", 9, registered)
        ref = AggregateRef(AggregateType.NODE, node_id)
        written = await EventStore(bus).append(Write(ref, 0, (joined.events[0].envelope,)))
        tick: ClusterChange = await asyncio.wait_for(first, 10)
        while node_id not in tick.node_ids:
            tick = await asyncio.wait_for(next_tick(), 10)
        assert tick.seq >= written.seqs[-1]
        answer = await cluster_as(world, "root")
        # The tick came once the views held the change.
        assert [n["resourceGroup"] for n in answer["nodes"] if n["id"] == node_id] == [group]
    finally:
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await first
        await ticks.aclose()


CARRIED = """subscription { clusterChanges(everyMs: 50) {
  seq nodeIds nodes { id hostname resourceGroup state } gpuMap sessionsOnNodes } }"""
NAMED = """query($ids: [ID!]!) { cluster {
  nodes(nodeIds: $ids) { id hostname resourceGroup state } gpuMap(nodeIds: $ids) } }"""


async def test_a_tick_carries_the_named_nodes_as_the_subscriber_may_see_them(
    world: World, bus: Bus
) -> None:
    # A node of its own in a group of its own, its one GPU half held by carol's session
    # (another domain than the admin who follows).
    cast = world.cast
    node_id, group = cast.id("gpu-c"), f"{world.group}-c"
    h = History(cast)
    capacity = ResourceSlots.of(cpu="4", memory=8 * GIB, gpu="1")
    (gpu,) = _gpus(node_id)[:1]
    h.add(AggregateType.NODE, "gpu-c", 0, NodeRegistered(
        hostname=node_id, resource_group=group, capacity=capacity, devices=(gpu,),
    ))  # fmt: skip
    h.add(AggregateType.AGENT, "gpu-c", 0, AgentRegistered(
        epoch=1, hostname=node_id, backend="simulated", capacity=capacity, devices=(gpu,),
        resource_group=group,
    ))  # fmt: skip
    spec = SessionSpec(
        image="busybox", resource_group=group, name="halves",
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1", memory=GIB, gpu="0.5")),),
    )  # fmt: skip
    requested = SessionRequested(
        spec=spec, kernel_ids=(cast.id("k-s4"),), owner=cast.people["carol"]
    )
    h.add(AggregateType.SESSION, "s4", 1, requested)
    share = DeviceShare(index=0, uuid=gpu.uuid, hundredths=50)
    h.add(AggregateType.NODE, "gpu-c", 2, ResourcesAllocated(
        kernel_id=cast.id("k-s4"), session_id=cast.id("s4"),
        slots=ResourceSlots.of(cpu="1", memory=GIB, gpu="0.5"), devices=(share,),
    ))  # fmt: skip
    # Started, as the scheduler and the agent would have it (other tests' schedulers fold the
    # same log).
    started = KernelStarted(kernel_id=cast.id("k-s4"), session_id=cast.id("s4"), container_id="c")
    h.add(AggregateType.AGENT, "gpu-c", 3, started)
    h.add(AggregateType.SESSION, "s4", 3, SessionStarted(reason="kernel started"))
    board = QueueBoard.on(bus)
    ticks = subscribe(world.gw.url, world.auth["admin"], CARRIED)
    first = asyncio.ensure_future(anext(ticks))
    try:
        # The feed reads from the log's end: a queue that moves says when it is listening.
        for total in range(100):
            await board.publish(group, [], total)
            await asyncio.wait({first}, timeout=0.5)
            if first.done():
                break
        await write(EventStore(bus), h.events, {})
        # The node's ticks until the one that holds the allocation (ticks 50 ms apart may
        # come between the events).
        while True:
            change = (await asyncio.wait_for(anext(ticks), 10))["clusterChanges"]
            gpus = change["gpuMap"].get(node_id)
            if gpus and gpus[0]["holds"]:
                break
    finally:
        await ticks.aclose()
    asked = (await world.gw.gql(NAMED, auth=world.auth["admin"], ids=change["nodeIds"]))["data"]
    assert change["nodes"] == asked["cluster"]["nodes"]
    assert change["gpuMap"] == asked["cluster"]["gpuMap"]
    assert [(n["id"], n["resourceGroup"]) for n in change["nodes"]] == [(node_id, group)]
    ((held,),) = [g["holds"] for g in gpus]
    assert (held["hundredths"], held["sessionId"], held["user"]) == (50, None, None)
    assert change["sessionsOnNodes"] >= 2


async def test_changes_sooner_than_every_ms_after_a_tick_go_in_the_next_one_together(
    world: World, bus: Bus
) -> None:
    services = world.gw.services
    ticks = cluster_changes(bus, services.queues, services.views, every_s=1.0, poll_s=0.2)
    store, cast = EventStore(bus), world.cast
    names = [f"fold-{i}" for i in range(3)]

    async def join(name: str) -> None:
        h = History(cast)
        registered = NodeRegistered(
            hostname=cast.id(name), resource_group=f"{world.group}-fold",
            capacity=ResourceSlots.of(cpu="2", memory=GIB),
        )  # fmt: skip
        h.add(AggregateType.NODE, name, 0, registered)
        ref = AggregateRef(AggregateType.NODE, cast.id(name))
        await store.append(Write(ref, 0, (h.events[0].envelope,)))

    first = asyncio.ensure_future(anext(ticks))
    try:
        await asyncio.sleep(0.5)  # the feed reads from the log's end: start it first
        await join(names[0])
        tick = await asyncio.wait_for(first, 10)
        while cast.id(names[0]) not in tick.node_ids:
            tick = await asyncio.wait_for(anext(ticks), 10)
        # Two nodes join one after the other, well within the second after that tick: the
        # next tick names both.
        await join(names[1])
        await asyncio.sleep(0.3)
        await join(names[2])
        later = await asyncio.wait_for(anext(ticks), 10)
        assert later.node_ids == [cast.id(names[1]), cast.id(names[2])]
    finally:
        first.cancel()
        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
            await first
        await ticks.aclose()
