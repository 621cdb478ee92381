"""``createEndpoint`` reading the model folder's ``model-definition.json`` through the real
storage data plane: the command, port, mount and health check come from the file when the
input leaves them out (what the input gives wins), a wrong file is refused naming the file and
the field, and a YAML-only folder is refused with a sentence saying JSON is read. A real
gateway, storage service and data plane; the serving controller's stand-in decides
(``serving_log_support.MinimalDecider``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from commands.serving.messages import CreateEndpoint
from events.bus import Bus
from jetyard.sdk import AsyncClient
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM
from schemas.tenancy import project_id_for
from services.storage.control.service import StorageService
from services.storage.settings import StorageSettings
from tests.integration.gateway_support import Gateway, gql_ok, running_gateway
from tests.integration.serving_log_support import MinimalDecider
from tests.integration.storage_support import KEY
from tests.integration.vfolder_api.support import data_plane

DEFINITION = {
    "models": [{
        "name": "echo", "model_path": "/models/echo",
        "service": {"start_command": ["serve", "{model_path}"], "port": 9000,
                    "health_check": {"path": "/ready", "max_retries": 4}},
    }]
}  # fmt: skip
CREATE = """mutation($input: CreateEndpointInput!) { createEndpoint(input: $input) { status
    endpoint { revisions { port command modelFolder modelMount } } } }"""


@dataclass
class World:
    gw: Gateway
    keys: tuple[str, str]
    tmp: Path


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    root = tmp_path_factory.mktemp("model-definition")
    settings = StorageSettings(
        token_key=KEY, volumes={"local": {"backend": "local", "root": root / "local"}},
        default_volume="local", durable=f"storage-test-{new_id()[:8]}", poll_timeout_s=0.2,
        command_fetch_timeout_s=0.2,
    )  # fmt: skip
    service = StorageService(bus, settings)
    try:
        await service.start()
        async with (
            data_plane(service, settings) as storage_url,
            running_gateway(
                bus, root / "gateway", command_timeout_s=10.0, storage_url=storage_url,
                storage_token_key=KEY,
            ) as gw,
        ):  # fmt: skip
            domain = f"md-{new_id()[:6]}"
            await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
            await gql_ok(
                gw, 'mutation($d: String!) { createProject(domain: $d, name: "lab") { id } }',
                d=domain,
            )  # fmt: skip
            made = await gql_ok(
                gw,
                """mutation($e: String!, $d: String!, $p: [ID!]) { createUser(email: $e,
                    password: "pw-123456", domain: $d, role: "user", projects: $p) { id } }""",
                e=f"m-{new_id()[:6]}@example.org", d=domain, p=[project_id_for(domain, "lab")],
            )  # fmt: skip
            issued = await gql_ok(
                gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }",
                u=made["createUser"]["id"],
            )  # fmt: skip
            keys = issued["createKeypair"]["accessKey"], issued["createKeypair"]["secretKey"]
            await service.sync()  # the storage service knows the person before deciding
            yield World(gw, keys, root)
    finally:
        await service.stop()
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(COMMANDS_STREAM, settings.durable)


@pytest.fixture
async def decider(bus: Bus) -> AsyncIterator[MinimalDecider]:
    found = MinimalDecider(bus)
    await found.start()
    yield found
    await found.stop()


async def model_folder(world: World, files: dict[str, str]) -> str:
    """A new folder of the person's holding ``files``; its name."""
    name = f"model-{new_id()[:6]}"
    local = world.tmp / name
    local.mkdir()
    async with AsyncClient(world.gw.url, *world.keys) as jy:
        await jy.folders.create(name, usage_mode="model")
        for file, text in files.items():
            (local / file).write_text(text)
            await jy.folders.upload(name, local / file, file)
    return name


async def create(world: World, **revision: Any) -> dict[str, Any]:
    given = {"name": f"md-{new_id()[:8]}", "revision": {"image": "srv:1", **revision}}
    return await world.gw.gql(CREATE, input=given, auth=world.gw.auth_of(*world.keys))


YAML_DEFINITION = """\
models:
  - name: echo
    model_path: /models/echo
    service:
      start_command: serve {model_path}
      port: 9000
      health_check: {path: /ready, max_retries: 4}
"""


async def test_a_yaml_definition_as_backendai_writes_it_is_read(
    world: World, decider: MinimalDecider
) -> None:
    folder = await model_folder(world, {"model-definition.yaml": YAML_DEFINITION})

    answer = await create(world, model=folder)

    assert "errors" not in answer, answer
    (sent,) = [c for c in decider.taken if isinstance(c, CreateEndpoint)]
    assert (sent.spec.port, sent.spec.command, sent.spec.model_mount) == (
        9000, ("serve", "{model_path}"), "/models/echo",
    )  # fmt: skip
    assert (sent.spec.health.path, sent.spec.health.failures) == ("/ready", 4)


async def test_the_definition_fills_what_the_input_leaves_out(
    world: World, decider: MinimalDecider
) -> None:
    folder = await model_folder(world, {"model-definition.json": json.dumps(DEFINITION)})

    answer = await create(world, model=folder)

    assert "errors" not in answer, answer
    (sent,) = [c for c in decider.taken if isinstance(c, CreateEndpoint)]
    spec = sent.spec
    assert (spec.port, spec.command, spec.model_mount, spec.model_folder) == (
        9000, ("serve", "{model_path}"), "/models/echo", folder,
    )  # fmt: skip
    assert (spec.health.path, spec.health.failures) == ("/ready", 4)
    # What the input gives wins over the file.
    given = await create(world, model=folder, port=8080, command=["other"])
    assert "errors" not in given, given
    assert decider.taken[-1].spec.port == 8080  # type: ignore[attr-defined]
    assert decider.taken[-1].spec.command == ("other",)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("files", "error"),
    [
        (
            {"model-definition.json": '{"models": [{"service": {"start_command": "s"}}]}'},
            "model-definition.json: field 'models.0.service.port': Field required",
        ),
        (
            {"model-definition.yaml": "models: []"},
            "model-definition.yaml: field 'models': Tuple should have at least 1 item",
        ),
        (
            {"model-definition.yaml": "models:\n  - service: {port: [}"},
            "model-definition.yaml is not YAML:",
        ),
        ({"model-definition.yaml": "#" * 70_000}, "model-definition.yaml is over 65536 bytes"),
        ({}, "field 'revision.port': field required"),
    ],
    ids=["no-port", "empty-yaml", "broken-yaml", "huge", "no-file"],
)
async def test_a_wrong_or_missing_definition_is_refused_naming_why(
    world: World, decider: MinimalDecider, files: dict[str, str], error: str
) -> None:
    folder = await model_folder(world, files)

    answer = await create(world, model=folder)

    (problem,) = answer["errors"]
    assert error in problem["message"]
    assert problem["extensions"]["code"] == "invalid"
    assert decider.taken == []
