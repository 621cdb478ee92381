"""A resource group's sandbox through the real gateway: a new group is sandboxed safely, an
admin opens and closes it with ``createResourceGroup`` / ``modifyResourceGroup`` (one argument
per setting), ``resourceGroups`` shows it, the directory the scheduler reads holds it, and a
value out of bounds is refused naming its argument."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from events.bus import Bus
from schemas.ids import new_id
from schemas.sandbox import Sandbox
from tests.integration.gateway_support import Gateway, running_gateway

GROUPS = "{ resourceGroups { name noNewPrivileges pidsLimit rawSockets agentSelection } }"
CREATE = """mutation($n: String!, $p: Int, $r: Boolean) {
    createResourceGroup(name: $n, pidsLimit: $p, rawSockets: $r) { status message } }"""
MODIFY = """mutation($n: String!, $p: Int, $nnp: Boolean) {
    modifyResourceGroup(name: $n, pidsLimit: $p, noNewPrivileges: $nnp) { status message } }"""


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("sandbox")) as gw:
        yield gw


async def shown(gw: Gateway, name: str) -> dict[str, Any]:
    body = await gw.gql(GROUPS)
    assert "errors" not in body, body
    found: dict[str, Any] = next(g for g in body["data"]["resourceGroups"] if g["name"] == name)
    return found


async def answer(gw: Gateway, query: str, **variables: Any) -> dict[str, Any]:
    body = await gw.gql(query, **variables)
    assert "errors" not in body, body
    result: dict[str, Any] = next(iter(body["data"].values()))
    return result


async def test_an_admin_opens_and_closes_a_groups_sandbox(gateway: Gateway) -> None:
    name, directory = f"g-{new_id()[:8]}", gateway.services.directory
    await answer(gateway, CREATE, n=name)
    assert await shown(gateway, name) == {
        "name": name, "noNewPrivileges": True, "pidsLimit": 4096, "rawSockets": False,
        "agentSelection": "dispersed",
    }  # fmt: skip
    assert directory.group_scheduling(name).sandbox == Sandbox()

    await answer(gateway, MODIFY, n=name, p=0, nnp=False)  # 0 unsets: no limit
    assert directory.group_scheduling(name).sandbox == Sandbox(
        no_new_privileges=False, pids_limit=None
    )
    await answer(gateway, MODIFY, n=name, p=512)  # the rest kept
    assert await shown(gateway, name) == {
        "name": name, "noNewPrivileges": False, "pidsLimit": 512, "rawSockets": False,
        "agentSelection": "dispersed",
    }  # fmt: skip

    opened = f"g-{new_id()[:8]}"
    await answer(gateway, CREATE, n=opened, p=100, r=True)
    assert directory.group_scheduling(opened).sandbox == Sandbox(pids_limit=100, raw_sockets=True)


async def test_a_pids_limit_out_of_bounds_is_refused_naming_it(gateway: Gateway) -> None:
    name = f"g-{new_id()[:8]}"
    body = await gateway.gql(CREATE, n=name, p=3)
    assert body["errors"][0]["message"] == "pidsLimit must not be less than 16, got 3", body
    assert body["errors"][0]["extensions"]["code"] == "invalid"
    listed = await gateway.gql(GROUPS)
    assert name not in {g["name"] for g in listed["data"]["resourceGroups"]}
