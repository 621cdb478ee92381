"""The typed SDK clients against a fake gateway (``httpx.MockTransport``): queries select
exactly their models' fields, a create sends camelCase input without the fields left out, a
REJECTED outcome is a ``JetyardError`` with its code, listings read every page, a login token
goes as a bearer header, and the blocking ``Client`` returns what ``AsyncClient`` does."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from jetyard.sdk import AsyncClient, Client, JetyardError
from jetyard.sdk.models import Session
from jetyard.sdk.wire import selection

SESSION = {
    "id": "s1", "name": None, "status": "RUNNING", "statusReason": "", "type": "batch",
    "image": "img", "resources": {"cpu": "0.5", "memoryBytes": "67108864", "gpu": "0"},
    "command": ["true"], "kernelIds": ["k1"], "exitCode": None, "result": None,
    "clusterSize": 1, "createdAt": "2030-01-01T00:00:00Z", "updatedAt": "2030-01-01T00:00:01Z",
    "seq": 7,
}  # fmt: skip


def _gateway(
    seen: list[httpx.Request], answer: Callable[[str, dict[str, Any]], dict[str, Any]]
) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        return httpx.Response(200, json={"data": answer(body["query"], body.get("variables"))})

    return httpx.MockTransport(handle)


def test_selections_follow_the_models() -> None:
    fields = selection(Session)
    assert fields.startswith("id name status statusReason type image resources { cpu ")
    assert "history { status reason at seq queuePosition queueLength }" in fields
    assert "servicePorts { kernelId name protocol port state public }" in fields


async def test_create_sends_camel_case_and_a_refusal_is_an_error() -> None:
    seen: list[httpx.Request] = []

    def answer(query: str, variables: dict[str, Any]) -> dict[str, Any]:
        refused = variables["input"]["image"] == "nope"
        return {"createSession": {
            "commandId": "c1", "status": "REJECTED" if refused else "ACCEPTED",
            "code": "not-found" if refused else None,
            "message": "no node has image nope" if refused else "", "sessionId": "s1",
        }}  # fmt: skip

    async with AsyncClient("http://gw.test", "AK", "SK", transport=_gateway(seen, answer)) as jy:
        created = await jy.sessions.create(
            "img", type="batch", command=["sh", "-c", "x"], cluster_size=2,
            mounts=["data"], env={"A": "1"}, depends_on=["s0"],
        )  # fmt: skip
        assert (created.status, created.session_id) == ("ACCEPTED", "s1")
        sent = json.loads(seen[0].content)["variables"]["input"]
        assert sent == {
            "image": "img", "type": "batch", "cpu": "1", "memory": "256m", "gpu": "0",
            "command": ["sh", "-c", "x"], "clusterSize": 2, "dependsOn": ["s0"],
            "mounts": [{"folder": "data", "path": None, "readOnly": False}],
            "env": [{"name": "A", "value": "1"}],
        }  # fmt: skip
        assert seen[0].headers["authorization"].startswith("Jetyard signMethod=HMAC-SHA256")
        with pytest.raises(JetyardError) as refused:
            await jy.sessions.create("nope")
        assert (str(refused.value), refused.value.code) == ("no node has image nope", "not-found")


def test_the_blocking_client_reads_every_page_with_a_token() -> None:
    seen: list[httpx.Request] = []

    def answer(query: str, variables: dict[str, Any]) -> dict[str, Any]:
        last = variables["after"] is not None
        node = {**SESSION, "id": "s2" if last else "s1"}
        page = {"hasNextPage": not last, "endCursor": "c1"}
        return {"sessions": {"edges": [{"node": node}], "pageInfo": page}}

    with Client("http://gw.test", token="tok-1", transport=_gateway(seen, answer)) as jy:
        found = jy.sessions.list()
    assert [s.id for s in found] == ["s1", "s2"]
    assert found[0].resources.memory_bytes == "67108864" and found[0].created_at.year == 2030
    assert [json.loads(r.content)["variables"]["after"] for r in seen] == [None, "c1"]
    assert {r.headers["authorization"] for r in seen} == {"Bearer tok-1"}


def test_admin_calls_write_their_arguments_and_refusals_raise() -> None:
    seen: list[str] = []

    def answer(query: str, variables: dict[str, Any] | None) -> dict[str, Any]:
        seen.append(query)
        refused = "taken@" in query
        status, message = ("REJECTED", "email taken") if refused else ("ACCEPTED", "ok")
        return {"createUser": {"commandId": "c", "status": status, "message": message, "id": "u1"}}

    with Client("http://gw.test", "AK", "SK", transport=_gateway([], answer)) as jy:
        assert jy.admin.create_user("a@b.org", "pw", projects=["p1"]).id == "u1"
        assert 'createUser(email: "a@b.org", password: "pw", domain: "default", role: ' in seen[0]
        assert 'projects: ["p1"]' in seen[0] and "policy" not in seen[0]
        with pytest.raises(JetyardError, match="email taken"):
            jy.admin.create_user("taken@b.org", "pw")


def test_a_user_made_with_a_fair_share_sends_it_and_one_without_leaves_it_out() -> None:
    seen: list[str] = []

    def answer(query: str, variables: dict[str, Any] | None) -> dict[str, Any]:
        seen.append(query)
        if "viewer" in query:
            return {"viewer": {"userId": "me", "role": "admin", "domain": "lab", "projects": [],
                               "accessKey": "AK"}}  # fmt: skip
        return {"createUser": {"commandId": "c", "status": "ACCEPTED", "message": "", "id": "u1"}}

    with Client("http://gw.test", "AK", "SK", transport=_gateway([], answer)) as jy:
        jy.admin.create_user("a@b.org", "pw", fair_share=5)
        made = jy.admin.add_user("b@b.org", "vision", fair_share=10_000)
        jy.admin.create_user("c@b.org", "pw")
    assert "fairShare: 5" in seen[0]
    assert made.domain == "lab" and "fairShare: 10000" in seen[-2]
    assert "fairShare" not in seen[-1]


def test_half_a_keypair_is_refused() -> None:
    with pytest.raises(ValueError, match="both its access key and its secret key"):
        AsyncClient("http://gw.test", "AK")
