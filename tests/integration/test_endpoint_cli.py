"""``jetyard endpoint`` and the SDK's ``endpoints`` against the real gateway on the real log
(the serving controller's stand-in deciding, ``serving_log_support.MinimalDecider``): create
with rules, list, show, scale, update, a token printed once and revoked, destroy; a refusal is
one sentence and exit status 1."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from commands.serving.messages import CreateEndpoint
from events.bus import Bus
from jetyard.sdk import AsyncClient, JetyardError
from schemas.ids import new_id
from schemas.serving import ScalingMetric, parse_token
from schemas.tenancy import project_id_for
from tests.integration.gateway_support import Gateway, gql_ok, running_gateway
from tests.integration.serving_log_support import MinimalDecider


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


async def keypair(gw: Gateway) -> tuple[str, str]:
    """A user of a new domain's project ``lab``, and their keypair."""
    domain = f"d-{new_id()[:6]}"
    await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
    await gql_ok(
        gw, 'mutation($d: String!) { createProject(domain: $d, name: "lab") { id } }', d=domain
    )
    made = await gql_ok(
        gw,
        """mutation($e: String!, $d: String!, $p: [ID!]) { createUser(email: $e,
            password: "pw-123456", domain: $d, role: "user", projects: $p) { id } }""",
        e=f"u-{new_id()[:6]}@example.org", d=domain, p=[project_id_for(domain, "lab")],
    )  # fmt: skip
    issued = await gql_ok(
        gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }",
        u=made["createUser"]["id"],
    )  # fmt: skip
    return issued["createKeypair"]["accessKey"], issued["createKeypair"]["secretKey"]


async def jetyard(gw: Gateway, keys: tuple[str, str], *args: str) -> tuple[int, str, str]:
    env = {
        **os.environ, "JETYARD_ENDPOINT": gw.url, "JETYARD_ACCESS_KEY": keys[0],
        "JETYARD_SECRET_KEY": keys[1], "XDG_CONFIG_HOME": "/nonexistent",
    }  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "jetyard"), "endpoint", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_sdk_makes_and_changes_an_endpoint(
    gateway: Gateway, decider: MinimalDecider
) -> None:
    keys = await keypair(gateway)
    name = f"sdk-{new_id()[:8]}"
    async with AsyncClient(gateway.url, *keys) as jy:
        created = await jy.endpoints.create(
            name, image="jetyard-echo:1", port=8000, replicas=2, max_replicas=4,
            rules=[{"metric": "inflight", "scale_up_above": 4, "scale_down_below": 1}],
            env={"MODE": "fast"}, health={"path": "/ready", "warmup_s": 60}, memory="512m",
        )  # fmt: skip
        assert (created.name, created.status, created.desired_replicas) == (
            name, "UNAVAILABLE", 2,
        )  # fmt: skip
        assert created.rules[0].metric == "inflight" and created.max_replicas == 4
        (sent,) = [c for c in decider.taken if isinstance(c, CreateEndpoint)]
        assert sent.scaling.rules[0].metric is ScalingMetric.INFLIGHT
        assert (sent.spec.health.path, sent.spec.health.warmup_s) == ("/ready", 60)
        assert sent.spec.resources.memory_bytes == 512 << 20

        assert [e.name for e in await jy.endpoints.list()] == [name]
        assert (await jy.endpoints.scale(name, 3)).desired_replicas == 3
        updated = await jy.endpoints.update(name, image="jetyard-echo:2", reason="v2")
        assert updated.target_revision == 2
        assert [r.image for r in updated.revisions] == ["jetyard-echo:2", "jetyard-echo:1"]
        modified = await jy.endpoints.modify(name, rules=[], min_replicas=0)
        assert (modified.rules, modified.min_replicas) == ([], 0)
        issued = await jy.endpoints.create_token(name, note="ci")
        assert parse_token(issued.token) is not None
        await jy.endpoints.revoke_token(name, issued.token_id, reason="done")
        (token,) = await jy.endpoints.tokens(name)
        assert (token.token_id, token.revoke_reason) == (issued.token_id, "done")
        assert (await jy.endpoints.destroy(name)).status == "DESTROYED"
        with pytest.raises(JetyardError, match=f"there is no endpoint '{name}'"):
            await jy.endpoints.scale(name, 1)


async def test_the_command_line(gateway: Gateway, decider: MinimalDecider) -> None:
    keys = await keypair(gateway)
    name = f"cli-{new_id()[:8]}"

    code, out, err = await jetyard(
        gateway, keys, "create", name, "--image", "jetyard-echo:1", "--port", "8000",
        "--replicas", "1", "--max", "3", "--rule", "rps>10:step=1,cooldown=60",
        "--command", "serve {model_path} --fast", "--json",
    )  # fmt: skip
    assert code == 0, err
    created = json.loads(out)
    assert (created["name"], created["maxReplicas"], created["rules"][0]["scaleUpAbove"]) == (
        name, 3, 10.0,
    )  # fmt: skip
    assert created["revisions"][0]["command"] == ["serve", "{model_path}", "--fast"]

    code, out, _ = await jetyard(gateway, keys, "ls", "--json")
    assert code == 0 and [json.loads(line)["name"] for line in out.splitlines()] == [name]
    code, out, _ = await jetyard(gateway, keys, "scale", name, "2")
    assert (code, out.strip()) == (0, f"scaled {name} to 2 (UNAVAILABLE)")
    code, out, _ = await jetyard(gateway, keys, "show", name)
    assert code == 0 and "rps>10:step=1,cooldown=60s,window=30s" in out
    assert "set to 2 by" in out  # the scaling decision, with its reason

    code, out, err = await jetyard(gateway, keys, "token", "create", name, "--expires", "7d")
    assert code == 0 and "shown only now" in err
    token_id = parse_token(out.strip())
    assert token_id is not None
    code, out, _ = await jetyard(gateway, keys, "token", "ls", name, "--json")
    (listed,) = [json.loads(line) for line in out.splitlines()]
    assert listed["tokenId"] == token_id[0] and token_id[1] not in out
    code, out, _ = await jetyard(gateway, keys, "token", "revoke", name, token_id[0])
    assert code == 0

    code, out, _ = await jetyard(gateway, keys, "rm", name)
    assert (code, out.strip()) == (0, f"rm {name}: DESTROYED")
    code, out, err = await jetyard(gateway, keys, "scale", name, "1")
    assert (code, out, err) == (1, "", f"jetyard endpoint scale: there is no endpoint '{name}'\n")
