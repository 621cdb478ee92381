"""A resource group's scheduling settings through the real gateway: created and changed with
the admin mutations, shown by ``resourceGroups``, held by the directory the scheduler reads,
and bad input refused with nothing sent or appended."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM
from schemas.tenancy import (
    AgentSelection,
    DeviceFill,
    GroupScheduling,
    HeadOfLine,
    QueuePolicy,
)
from tests.integration.gateway_support import Gateway, running_gateway

GROUPS = """{ resourceGroups { name queuePolicy agentSelection headOfLine
    starvationAfterSeconds fragmentationGuard deviceFill } }"""
CREATE = """mutation($n: String!, $h: String, $s: Int, $f: Boolean, $d: String, $q: String) {
    createResourceGroup(name: $n, headOfLine: $h, starvationAfterSeconds: $s,
                        fragmentationGuard: $f, deviceFill: $d, queuePolicy: $q) {
    status message } }"""
MODIFY = """mutation($n: String!, $h: String, $s: Int, $a: String) {
    modifyResourceGroup(name: $n, headOfLine: $h, starvationAfterSeconds: $s,
                        agentSelection: $a) { status message } }"""


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("groups")) as gw:
        yield gw


async def _group(gw: Gateway, name: str) -> dict[str, Any]:
    body = await gw.gql(GROUPS)
    assert "errors" not in body, body
    found: dict[str, Any] = next(g for g in body["data"]["resourceGroups"] if g["name"] == name)
    return found


async def _ok(gw: Gateway, query: str, **variables: Any) -> None:
    body = await gw.gql(query, **variables)
    assert "errors" not in body, body


async def test_a_group_is_created_with_defaults_and_settings_change_one_at_a_time(
    gateway: Gateway,
) -> None:
    name = f"g-{new_id()[:8]}"
    await _ok(gateway, CREATE, n=name)
    assert await _group(gateway, name) == {
        "name": name, "queuePolicy": "fifo", "agentSelection": "dispersed",
        "headOfLine": "backfill", "starvationAfterSeconds": 300, "fragmentationGuard": True,
        "deviceFill": "fill",
    }  # fmt: skip
    await _ok(gateway, MODIFY, n=name, h="block", s=0)
    changed = await _group(gateway, name)
    assert (changed["headOfLine"], changed["starvationAfterSeconds"]) == ("block", 0)
    assert changed["agentSelection"] == "dispersed"  # left out: kept
    assert gateway.services.directory.group_scheduling(name) == GroupScheduling(
        agent_selection=AgentSelection.DISPERSED, head_of_line=HeadOfLine.BLOCK,
        starvation_after_s=0,
    )  # fmt: skip


async def test_every_setting_given_at_creation_is_kept(gateway: Gateway) -> None:
    name = f"g-{new_id()[:8]}"
    await _ok(gateway, CREATE, n=name, h="BLOCK", s=900, f=False, d="evenly", q="drf")
    assert gateway.services.directory.group_scheduling(name) == GroupScheduling(
        queue_policy=QueuePolicy.DRF, agent_selection=AgentSelection.DISPERSED,
        head_of_line=HeadOfLine.BLOCK, starvation_after_s=900, fragmentation_guard=False,
        device_fill=DeviceFill.EVENLY,
    )  # fmt: skip
    shown = await _group(gateway, name)
    assert (shown["fragmentationGuard"], shown["deviceFill"]) == (False, "evenly")


async def test_bad_settings_are_refused_and_nothing_is_sent_or_appended(
    bus: Bus, gateway: Gateway
) -> None:
    name = f"g-{new_id()[:8]}"
    await _ok(gateway, CREATE, n=name)
    store = EventStore(bus)
    events_before = await store.stream_last_seq()
    commands_before = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    refused: list[tuple[str, dict[str, Any], str]] = [
        (CREATE, {"n": f"x-{name}", "h": "sometimes"}, "headOfLine must be one of block | "),
        (CREATE, {"n": f"x-{name}", "d": "pack"}, "deviceFill must be one of fill | evenly"),
        (CREATE, {"n": f"x-{name}", "s": -5}, "starvationAfterSeconds must not be negative"),
        (MODIFY, {"n": name, "s": 10**7}, "starvationAfterSeconds must be at most 604800"),
        (MODIFY, {"n": name, "a": "random"}, "agentSelection must be one of concentrated"),
    ]
    for query, variables, message in refused:
        body = await gateway.gql(query, **variables)
        assert message in body["errors"][0]["message"], body
        assert body["errors"][0]["extensions"]["code"] == "invalid"
    assert await store.stream_last_seq() == events_before
    assert (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq == commands_before
    assert gateway.services.directory.group_scheduling(name).starvation_after_s == 300
