"""The SDK's folder calls against a fake gateway (``httpx.MockTransport``): arguments written
as GraphQL literals, a refused outcome and a GraphQL error both a ``JetyardError`` with the
server's message and code, and listings read to the last page."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from jetyard.sdk import AsyncClient, JetyardError
from jetyard.sdk.wire import literal

NODE = {
    "id": "f1",
    "name": "data",
    "ownerKind": "user",
    "status": "ready",
    "bytesUsed": 5.0,
    "files": 1.0,
    "links": 2.0,
    "otherEntries": 1.0,
    "quotaBytes": None,
    "shares": [{"userId": "u2", "permission": "ro"}],
}


def test_literals_are_graphql_values() -> None:
    assert literal('a "b"\n\u00e9') == '"a \\"b\\"\\n\\u00e9"'
    assert (
        literal({"n": 1, "ok": True, "x": None, "l": [1.5]})
        == "{n: 1, ok: true, x: null, l: [1.5]}"
    )


async def test_refusals_carry_the_servers_words_and_listings_every_page() -> None:
    queries: list[str] = []

    def gateway(request: httpx.Request) -> httpx.Response:
        query: str = json.loads(request.content)["query"]
        queries.append(query)
        data: dict[str, Any]
        if "vfolders" in query:
            last = "after:" in query
            page = {
                "edges": [{"node": {**NODE, "id": "f2" if last else "f1"}}],
                "pageInfo": {"hasNextPage": not last, "endCursor": "c1"},
            }
            data = {"vfolders": page}
        elif "trashVFolder" in query:
            data = {
                "trashVFolder": {
                    "status": "REJECTED",
                    "code": "in-use",
                    "message": "folder data is mounted by a live session",
                }
            }
        elif "vfolder(" in query:
            data = {"vfolder": NODE}
        else:
            errors = [{"message": "there is no folder x", "extensions": {"code": "not-found"}}]
            return httpx.Response(200, json={"data": None, "errors": errors})
        return httpx.Response(200, json={"data": data})

    async with AsyncClient(
        "http://gw.test", "AK", "SK", transport=httpx.MockTransport(gateway)
    ) as jy:
        found = await jy.folders.list()
        assert [f.id for f in found] == ["f1", "f2"] and found[0].bytes_used == 5
        assert (found[0].files, found[0].links, found[0].other_entries) == (1, 2, 1)
        assert found[0].shares[0].permission == "ro"
        assert 'after: "c1"' in queries[1]
        with pytest.raises(JetyardError) as refused:
            await jy.folders.trash("data")
        assert str(refused.value) == "folder data is mounted by a live session"
        assert refused.value.code == "in-use"
        assert 'trashVFolder(id: "f1")' in queries[-1]
        with pytest.raises(JetyardError) as missing:
            await jy.folders.restore("data")
        assert (str(missing.value), missing.value.code) == ("there is no folder x", "not-found")
