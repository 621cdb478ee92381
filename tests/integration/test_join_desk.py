"""``POST /join`` on a real gateway and tenancy service: a good token is exchanged for the
agent's settings (the gateway's NATS URL and token, the token's resource group, a new node id
or the one the machine kept) and recorded as ``NodeJoined``; a malformed body or token is
refused with the reason; ``joinTokens`` lists the token with its nodes and never a secret; only
superadmins make tokens."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from events.bus import Bus
from events.domain.join import NodeJoined
from events.store import EventStore
from schemas.ids import new_id
from schemas.subjects import AggregateType
from tests.integration.gateway_support import Gateway, person, running_gateway
from tests.integration.scheduler_support import history

CREATE = (
    "mutation($g: String!) { createJoinToken(expiresInSeconds: 600, resourceGroup: $g, "
    'note: "desk") { tokenId token expiresAt outcome { status } } }'
)


@pytest.fixture
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("join")) as gw:
        yield gw


async def post(gateway: Gateway, body: object) -> httpx.Response:
    return await gateway.client.post(f"{gateway.url}/join", json=body)


async def test_a_good_token_is_exchanged_and_recorded(
    bus: Bus, store: EventStore, gateway: Gateway
) -> None:
    group = f"g{new_id()[:6]}"
    made = (await gateway.gql(CREATE, g=group))["data"]["createJoinToken"]
    assert made["outcome"]["status"] == "ACCEPTED" and made["expiresAt"] is not None
    token, token_id = made["token"], made["tokenId"]
    assert token.startswith(f"jyjoin_{token_id}_")

    answer = await post(gateway, {"token": token, "hostname": "gpu-7"})
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["resource_group"] == group and got["hostname"] == "gpu-7"
    assert got["nats_urls"] == [bus.settings.url] and got["nats_token"] == (
        bus.settings.token or ""
    )
    kept = new_id()
    again = await post(gateway, {"token": token, "hostname": "gpu-8", "node_id": kept})
    assert again.status_code == 200 and again.json()["node_id"] == kept
    joins = [
        e.envelope.payload
        for e in await history(store, AggregateType.JOIN_TOKEN, token_id)
        if e.envelope.name == NodeJoined.event_name
    ]
    assert [(j["node_id"], j["hostname"]) for j in joins] == [
        (got["node_id"], "gpu-7"), (kept, "gpu-8"),
    ]  # fmt: skip

    listed = (await gateway.gql("{ joinTokens { id note nodes revoked expired } }"))["data"]
    mine = next(t for t in listed["joinTokens"] if t["id"] == token_id)
    assert mine == {"id": token_id, "note": "desk", "nodes": [got["node_id"], kept],
                    "revoked": False, "expired": False}  # fmt: skip
    schema = await gateway.gql('{ __type(name: "JoinTokenInfo") { fields { name } } }')
    fields = {f["name"] for f in schema["data"]["__type"]["fields"]}
    assert not {"token", "secret", "secretSha256"} & fields


@pytest.mark.parametrize(
    ("body", "status", "said"),
    [
        ("not json", 400, "the body must be a JSON object"),
        ({"hostname": "h"}, 400, "token and hostname (strings) are required"),
        ({"token": "nope", "hostname": "h"}, 401, "unknown join token"),
        ({"token": f"jyjoin_{new_id()}_{'s' * 43}", "hostname": "h"}, 401, "unknown join token"),
        ({"token": f"jyjoin_{new_id()}_x", "hostname": "h", "node_id": "a.b"}, 400, "node id"),
    ],
)
async def test_a_bad_request_is_refused_with_the_reason(
    gateway: Gateway, body: object, status: int, said: str
) -> None:
    answer = await post(gateway, body)
    assert answer.status_code == status, answer.text
    assert said in answer.json()["error"]


async def test_only_a_superadmin_makes_lists_or_revokes_join_tokens(gateway: Gateway) -> None:
    _, domain_admin, _ = await person(gateway, "adm", "default", "default", role="admin")
    for query in (
        CREATE,
        "{ joinTokens { id } }",
        'mutation { revokeJoinToken(id: "x") { status } }',
    ):
        body = await gateway.gql(query, auth=domain_admin, g="default")
        assert "only cluster administrators" in body["errors"][0]["message"], body
