"""``cluster`` through the real gateway app on a real log: who holds each GPU, the queue, why a
waiting request does not fit, another domain's sessions unnamed; only the lists asked worked
out, a node's rows alone, one caller's picture never another's (the world: ``conftest``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from services.gateway.cluster.picture import Picture
from services.gateway.cluster.snapshot import Snapshot, pictures
from tests.integration.operator_gateway.support import (
    CLUSTER,
    World,
    cluster_as,
    mine,
)


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
