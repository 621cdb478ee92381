"""Property-based HTTP bodies and content types against a real gateway, signed and anonymous:
never a 500, never over 10 s, and nothing sent or stored for a request that was refused."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events.bus import Bus
from tests.fuzz.profile import fuzz_settings
from tests.fuzz.support import fuzzed_gateway, last_seqs
from tests.integration.gateway_support import Gateway

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
QUERIES = [
    "{ viewer { role } }",
    "{ sessions { edges { cursor } } }",
    "mutation { createSession(input: {image: 1}) { status } }",
    "{ __schema { types { name } } }",
    "query { ",
    'subscription { sessionStatus(id: "x") { status } }',
]
requests = st.fixed_dictionaries(
    {},
    optional={
        "query": st.one_of(st.sampled_from(QUERIES), st.text(max_size=60), json_values),
        "variables": json_values,
        "operationName": st.one_of(st.text(max_size=10), json_values),
    },
)
bodies = st.one_of(
    requests.map(lambda r: json.dumps(r).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=200),
    st.integers(min_value=1, max_value=3000).map(
        lambda n: b'{"query": ' + b"[" * n + b"]" * n + b"}"
    ),
)
content_types = st.sampled_from(
    ["application/json", "text/plain", "application/graphql", "multipart/form-data", ""]
)


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with fuzzed_gateway(bus, tmp_path_factory.mktemp("fuzz-http")) as gw:
        yield gw


@fuzz_settings
@given(body=bodies, content_type=content_types, signed=st.booleans())
async def test_no_body_makes_a_500_or_sends_anything_when_refused(
    gateway: Gateway, bus: Bus, body: bytes, content_type: str, signed: bool
) -> None:
    before = await last_seqs(bus)
    headers = {"content-type": content_type} if content_type else {}
    started = time.monotonic()
    answer = await gateway.client.post(
        f"{gateway.url}/graphql",
        content=body,
        headers=headers,
        auth=gateway.root if signed else httpx.Auth(),  # httpx.Auth(): sends nothing
    )
    assert time.monotonic() - started < 10
    assert answer.status_code < 500, answer.text
    refused = answer.status_code >= 400
    payload: Any = None
    with contextlib.suppress(ValueError):
        payload = answer.json()
    if isinstance(payload, dict) and payload.get("errors"):
        refused = True
        codes = {(e.get("extensions") or {}).get("code") for e in payload["errors"]}
        assert "internal" not in codes, payload
    if refused:
        assert await last_seqs(bus) == before
