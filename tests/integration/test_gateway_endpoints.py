"""Model-serving endpoints through the real gateway on the real log: createEndpoint sends the
owner this request authenticated and refuses bad input naming the field; queries read the
endpoints view; another user's endpoint is not found (a domain admin sees it); tokens are
answered once, sent as a digest and listed without secrets; scale, update, modify, revoke and
destroy; createSession refuses type inference. The commands are decided by a stand-in of the
serving controller (``serving_log_support.MinimalDecider``: every command it took is kept), and
in the last test by the serving controller itself."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from commands.serving.messages import CreateEndpoint, CreateEndpointToken, UpdateEndpoint
from events.bus import Bus
from schemas.ids import new_id
from schemas.serving import parse_token
from schemas.serving_load import LATENCY_BOUNDS_MS
from schemas.subjects import SERVING_LOAD_PREFIX
from tests.integration.gateway_support import Gateway, gql_ok, person, running_gateway
from tests.integration.scheduler_support import eventually
from tests.integration.serving_log_support import MinimalDecider
from tests.integration.serving_support import controller

FIELDS = """id name status urlPath userId projectId desiredReplicas minReplicas maxReplicas
openToPublic currentRevision targetRevision rules { metric scaleUpAbove step cooldownS }
revisions { revision image port command modelFolder envNames }
tokens { tokenId note revokedAt } scalingHistory { replicas source reason }"""
CREATE = f"""mutation($input: CreateEndpointInput!) {{ createEndpoint(input: $input) {{
    status endpoint {{ {FIELDS} }} }} }}"""


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("gateway")) as gw:
        yield gw


@pytest.fixture
async def decider(bus: Bus) -> AsyncIterator[MinimalDecider]:
    found = MinimalDecider(bus)
    await found.start()
    yield found
    await found.stop()


async def tenant(gw: Gateway) -> str:
    domain = f"d-{new_id()[:6]}"
    await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
    await gql_ok(
        gw, 'mutation($d: String!) { createProject(domain: $d, name: "lab") { id } }', d=domain
    )
    return domain


def new_input(**more: Any) -> dict[str, Any]:
    return {
        "name": f"ep-{new_id()[:8]}",
        "revision": {"image": "jetyard-echo:1", "port": 8000, "cpu": "0.5", "memory": "256m",
                     "env": [{"name": "TOKEN", "value": "s3cret"}]},
        **more,
    }  # fmt: skip


async def test_create_read_and_change_an_endpoint(
    gateway: Gateway, decider: MinimalDecider
) -> None:
    domain = await tenant(gateway)
    alice, alice_auth, _ = await person(gateway, "alice", domain, "lab")
    _, bob_auth, _ = await person(gateway, "bob", domain, "lab")
    _, admin_auth, _ = await person(gateway, "admin", domain, "lab", role="admin")
    rule = {"metric": "rps", "scaleUpAbove": 10, "step": 1, "cooldownS": 60}
    given = new_input(replicas=2, scaling={"maxReplicas": 3, "rules": [rule]})

    answer = await gateway.gql(CREATE, input=given, auth=alice_auth)

    assert "errors" not in answer, answer
    created = answer["data"]["createEndpoint"]
    assert created["status"] == "ACCEPTED"
    endpoint = created["endpoint"]
    assert (endpoint["name"], endpoint["status"], endpoint["urlPath"]) == (
        given["name"], "UNAVAILABLE", f"/e/{given['name']}/",
    )  # fmt: skip
    assert (endpoint["desiredReplicas"], endpoint["minReplicas"], endpoint["maxReplicas"]) == (
        2, 1, 3,
    )  # fmt: skip
    assert endpoint["rules"] == [{"metric": "rps", "scaleUpAbove": 10.0, "step": 1,
                                  "cooldownS": 60.0}]  # fmt: skip
    assert endpoint["revisions"] == [
        {"revision": 1, "image": "jetyard-echo:1", "port": 8000, "command": None,
         "modelFolder": None, "envNames": ["TOKEN"]}
    ]  # fmt: skip
    (sent,) = [c for c in decider.taken if isinstance(c, CreateEndpoint)]
    assert sent.owner == alice  # the owner this request authenticated, not one it claimed
    assert sent.spec.resources.cpu_milli == 500

    # Another user of the same domain: no such endpoint. Its domain's admin: it is there.
    query = "query($id: String!) { endpoint(id: $id) { id } }"
    hidden = await gateway.gql(query, id=given["name"], auth=bob_auth)
    assert hidden["data"]["endpoint"] is None
    listed = "{ endpoints { totalCount edges { node { name } } } }"
    assert (await gateway.gql(listed, auth=bob_auth))["data"]["endpoints"]["totalCount"] == 0
    mine = (await gateway.gql(listed, auth=alice_auth))["data"]["endpoints"]
    assert [e["node"]["name"] for e in mine["edges"]] == [given["name"]]
    seen = await gateway.gql(query, id=endpoint["id"], auth=admin_auth)
    assert seen["data"]["endpoint"] == {"id": endpoint["id"]}
    scale = "mutation($id: String!) { scaleEndpoint(id: $id, replicas: 3) { status } }"
    refused = await gateway.gql(scale, id=given["name"], auth=bob_auth)
    assert refused["errors"][0]["extensions"]["code"] == "not-found"

    # Scale, update (what is left out stays), modify.
    changed = await gateway.gql(
        f"""mutation($id: String!) {{ a: scaleEndpoint(id: $id, replicas: 3) {{ status }}
            b: updateEndpoint(id: $id, revision: {{image: "jetyard-echo:2"}}, reason: "v2") {{
               endpoint {{ targetRevision }} }}
            c: modifyEndpoint(id: $id, openToPublic: true) {{ endpoint {{ {FIELDS} }} }} }}""",
        id=given["name"], auth=alice_auth,
    )  # fmt: skip
    assert "errors" not in changed, changed
    assert changed["data"]["b"]["endpoint"]["targetRevision"] == 2
    after = changed["data"]["c"]["endpoint"]
    assert (after["desiredReplicas"], after["openToPublic"]) == (3, True)
    assert after["scalingHistory"][0]["source"] == "manual"
    (update,) = [c for c in decider.taken if isinstance(c, UpdateEndpoint)]
    assert (update.spec.image, update.spec.port, update.spec.env) == (
        "jetyard-echo:2", 8000, {"TOKEN": "s3cret"},
    )  # fmt: skip

    # Destroyed: gone from the listing, and the name is free.
    gone = await gateway.gql(
        "mutation($id: String!) { destroyEndpoint(id: $id) { endpoint { status } } }",
        id=given["name"], auth=alice_auth,
    )  # fmt: skip
    assert gone["data"]["destroyEndpoint"]["endpoint"]["status"] == "DESTROYED"
    assert (await gateway.gql(listed, auth=alice_auth))["data"]["endpoints"]["totalCount"] == 0


async def test_a_token_is_shown_once_and_sent_as_a_digest(
    gateway: Gateway, decider: MinimalDecider
) -> None:
    domain = await tenant(gateway)
    _, auth, _ = await person(gateway, "carol", domain, "lab")
    given = new_input()
    await gateway.gql(CREATE, input=given, auth=auth)

    issued = await gateway.gql(
        """mutation($id: String!) { createEndpointToken(id: $id, note: "ci") {
            status tokenId token expiresAt } }""",
        id=given["name"], auth=auth,
    )  # fmt: skip

    token = issued["data"]["createEndpointToken"]
    parsed = parse_token(token["token"])
    assert parsed is not None and parsed[0] == token["tokenId"]
    (sent,) = [c for c in decider.taken if isinstance(c, CreateEndpointToken)]
    assert sent.secret_sha256 == hashlib.sha256(parsed[1].encode()).hexdigest()
    assert parsed[1] not in sent.model_dump_json()
    shown = await gateway.gql(
        "query($id: String!) { endpoint(id: $id) { tokens { tokenId note revokedAt } } }",
        id=given["name"], auth=auth,
    )  # fmt: skip
    assert shown["data"]["endpoint"]["tokens"] == [
        {"tokenId": token["tokenId"], "note": "ci", "revokedAt": None}
    ]
    assert parsed[1] not in str(shown)
    revoked = await gateway.gql(
        """mutation($id: String!, $t: String!) { revokeEndpointToken(id: $id, tokenId: $t) {
            endpoint { tokens { revokedAt } } } }""",
        id=given["name"], t=token["tokenId"], auth=auth,
    )  # fmt: skip
    assert revoked["data"]["revokeEndpointToken"]["endpoint"]["tokens"][0]["revokedAt"]


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"revision": {"image": "x:1", "port": 2000}}, "field 'revision.port'"),
        ({"revision": {"image": "x:1"}}, "field 'revision.port'"),
        ({"revision": {"image": "x:1", "port": 80, "memory": "lots"}}, "memory"),
        ({"replicas": 5, "scaling": {"maxReplicas": 2}}, "replicas (5) must be within"),
        ({"scaling": {"rules": [{"metric": "rps"}]}}, "field 'rules.0'"),
        (
            {"scaling": {"rules": [{"metric": "watts", "scaleUpAbove": 1}]}},
            "field 'rules.0.metric'",
        ),
        ({"name": "Not_A_Name"}, "endpoint name 'Not_A_Name' is not valid"),
    ],
    ids=["reserved-port", "no-port", "memory", "bounds", "rule-threshold", "metric", "name"],
)
async def test_bad_input_names_the_field_and_sends_nothing(
    gateway: Gateway, decider: MinimalDecider, change: dict[str, Any], error: str
) -> None:
    answer = await gateway.gql(CREATE, input={**new_input(), **change})

    (problem,) = answer["errors"]
    assert error in problem["message"]
    assert problem["extensions"]["code"] == "invalid"
    assert decider.taken == []


async def test_create_session_refuses_type_inference(gateway: Gateway) -> None:
    answer = await gateway.gql(
        """mutation { createSession(input: {image: "busybox", type: "inference"}) {
            status } }"""
    )
    (problem,) = answer["errors"]
    assert problem["message"] == "type inference is for endpoints' replicas: use createEndpoint"


async def test_the_serving_controller_decides_what_the_gateway_sends(
    bus: Bus, gateway: Gateway
) -> None:
    """With the real controller (no replica asked for: 0 desired, so no scheduler is needed):
    its decisions reach the views, and its refusal is the mutation's error with its code."""
    domain = await tenant(gateway)
    _, auth, _ = await person(gateway, "dora", domain, "lab")
    given = new_input(replicas=0)
    async with controller(bus):
        created = await gateway.gql(CREATE, input=given, auth=auth)
        assert created["data"]["createEndpoint"]["status"] == "ACCEPTED", created
        assert created["data"]["createEndpoint"]["endpoint"]["status"] == "SCALED_TO_ZERO"

        # A second create of the name (a new request, so a new command) is refused, as a
        # second domain or folder of one name is: the name is taken while it lives.
        for spec in (given, {**given, "revision": {**given["revision"], "image": "other:1"}}):
            again = await gateway.gql(CREATE, input=spec, auth=auth)
            (problem,) = again["errors"]
            assert problem["extensions"]["code"] == "conflict"
            assert problem["message"] == f"an endpoint named {given['name']} exists"

        issued = await gateway.gql(
            'mutation($id: String!) { createEndpointToken(id: $id) { status tokenId } }',
            id=given["name"], auth=auth,
        )  # fmt: skip
        assert issued["data"]["createEndpointToken"]["status"] == "ACCEPTED", issued
        gone = await gateway.gql(
            "mutation($id: String!) { destroyEndpoint(id: $id) { endpoint { status tokens {"
            " revokedAt } } } }",
            id=given["name"], auth=auth,
        )  # fmt: skip
        assert "errors" not in gone, gone
        assert gone["data"]["destroyEndpoint"]["endpoint"]["status"] in ("DESTROYING", "DESTROYED")


async def test_traffic_is_what_the_proxies_report_now(
    bus: Bus, gateway: Gateway, decider: MinimalDecider
) -> None:
    # Two proxy replicas report (core NATS, as services/appproxy/endpoints/load_reports.py
    # does): the rate adds up over both, in flight is now, latency is over what was answered.
    domain = await tenant(gateway)
    _, auth, _ = await person(gateway, "alice", domain, "lab")
    created = await gateway.gql(CREATE, input=new_input(), auth=auth)
    endpoint_id = created["data"]["createEndpoint"]["endpoint"]["id"]
    query = """query($id: String!) { endpoint(id: $id) {
        traffic { requestsPerSecond inflight p50Ms p99Ms } } }"""
    quiet = await gql_ok(gateway, query, id=endpoint_id, auth=auth)
    assert quiet["endpoint"]["traffic"]["inflight"] in (None, 0)

    now = time.time()
    twenty_at_ten_ms = [0, 20] + [0] * (len(LATENCY_BOUNDS_MS) - 1)
    for proxy, (first, last, inflight) in {"p1": (0, 20, 1), "p2": (5, 15, 2)}.items():
        for at, requests, latency in ((now - 5, first, [0] * 13), (now, last, twenty_at_ten_ms)):
            load = {"requests": requests, "inflight": inflight, "latency_ms": latency}
            body = {"proxy": f"{proxy}-{endpoint_id}", "at": at, "endpoints": {endpoint_id: load}}
            await bus.nc.publish(f"{SERVING_LOAD_PREFIX}.{proxy}", json.dumps(body).encode())
    await bus.nc.flush()

    async def reported() -> dict[str, Any] | None:
        found = await gql_ok(gateway, query, id=endpoint_id, auth=auth)
        traffic: dict[str, Any] = found["endpoint"]["traffic"]
        return traffic if traffic["inflight"] == 3 else None

    traffic = await eventually(reported, timeout=5)
    assert traffic["requestsPerSecond"] == pytest.approx((20 + 10) / 5)
    # 40 answered, all in (5, 10] ms: the median is halfway through that bucket.
    assert traffic["p50Ms"] == pytest.approx(7.5)
    assert 9.0 < traffic["p99Ms"] <= 10.0
