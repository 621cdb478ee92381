"""Property-based GraphQL input to ``createSession`` and the admin mutations through a real
gateway: whatever the values, no HTTP 500, no answer slower than 10 s, no event stored for a
refused request, and input refused as invalid is not even sent (JY_COMMANDS does not move)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.bus import Bus
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.support import fuzzed_gateway, last_seqs
from tests.integration.gateway_support import Gateway

HOSTILE_AMOUNTS = [
    "1e400", "99999999999999999999", "NaN", "-nan", "Infinity", "-1", "0", "0.001", "0.0000001",
    "\u0661", "\uff11", "1\x00", " 1 ", "1_000", "0x10", "", "1.", ".5", "1e3", "2" * 40,
]  # fmt: skip
HOSTILE_SIZES = ["1", "1k", "0", "99999999999999999999t", "64m\x00", "1e9", "-64m", "6m", "64M"]

amounts = st.one_of(st.sampled_from(HOSTILE_AMOUNTS), st.text(max_size=24))
sizes = st.one_of(st.sampled_from(HOSTILE_SIZES), st.text(max_size=24))
words = st.text(max_size=40)
session_inputs = st.fixed_dictionaries(
    {"image": st.one_of(st.just("jetyard-busybox:latest"), words)},
    optional={
        "type": st.sampled_from(["batch", "interactive", "x", "\x00"]),
        "cpu": amounts,
        "memory": sizes,
        "gpu": amounts,
        "command": st.lists(words, max_size=4),
        "env": st.lists(st.fixed_dictionaries({"name": words, "value": words}), max_size=3),
        "name": words,
        "priority": st.integers(min_value=-(2**31), max_value=2**31 - 1),
        "clusterSize": st.integers(min_value=-(2**31), max_value=2**31 - 1),
        "dependsOn": st.lists(words, max_size=3),
        "timeoutSeconds": st.integers(min_value=-(2**31), max_value=2**31 - 1),
    },
)
CREATE = "mutation($input: CreateSessionInput!) { createSession(input: $input) { status } }"
POLICY = (
    "mutation($name: String!, $keypair: KeypairPolicyInput) { createResourcePolicy("
    'kind: "keypair", name: $name, keypair: $keypair) { status message } }'
)
DOMAIN = (
    "mutation($name: String!, $description: String!, $slots: SlotLimitsInput) { createDomain("
    "name: $name, description: $description, totalResourceSlots: $slots) { status message } }"
)
slot_limits = st.fixed_dictionaries({}, optional={"cpu": amounts, "memory": sizes, "gpu": amounts})
counts = st.integers(min_value=-(2**31), max_value=2**31 - 1)
policies = st.fixed_dictionaries(
    {},
    optional={
        "totalResourceSlots": slot_limits,
        "maxConcurrentSessions": counts,
        "maxPendingSessions": counts,
        "maxContainersPerSession": counts,
        "maxSessionLifetimeS": counts,
        "maxPriority": counts,
    },
)


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with fuzzed_gateway(bus, tmp_path_factory.mktemp("fuzz-inputs")) as gw:
        yield gw


async def _send(gateway: Gateway, bus: Bus, query: str, variables: dict[str, Any]) -> None:
    before = await last_seqs(bus)
    started = time.monotonic()
    answer = await gateway.client.post(
        f"{gateway.url}/graphql",
        json={"query": query, "variables": variables},
        auth=gateway.root,
    )
    assert time.monotonic() - started < 10, "an answer took over 10 s"
    assert answer.status_code != 500, answer.text
    assert answer.status_code in (200, 400), answer.text
    body = answer.json()
    if body.get("errors"):
        codes = {(e.get("extensions") or {}).get("code") for e in body["errors"]}
        assert "internal" not in codes, body
        commands, events = await last_seqs(bus)
        # A rejection is an outcome, never an event; input refused at the edge (invalid)
        # is not even sent as a command.
        assert events == before[1], f"a refused request stored an event: {body}"
        if codes == {"invalid"}:
            assert commands == before[0], f"invalid input was sent: {body}"


@fuzz_settings
@given(session=session_inputs)
async def test_create_session_never_fails_badly(
    gateway: Gateway, bus: Bus, session: dict[str, Any]
) -> None:
    await _send(gateway, bus, CREATE, {"input": session})


@fuzz_settings
@given(name=words, keypair=policies)
async def test_create_resource_policy_never_fails_badly(
    gateway: Gateway, bus: Bus, name: str, keypair: dict[str, Any]
) -> None:
    await _send(gateway, bus, POLICY, {"name": name, "keypair": keypair})


@fuzz_settings
@given(name=words, description=st.text(max_size=300), slots=slot_limits)
async def test_create_domain_never_fails_badly(
    gateway: Gateway, bus: Bus, name: str, description: str, slots: dict[str, Any]
) -> None:
    await _send(gateway, bus, DOMAIN, {"name": name, "description": description, "slots": slots})
