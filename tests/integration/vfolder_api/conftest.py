"""The folder API tests' world: a real gateway and storage service per test module (not per
package: the guard on what a module leaves behind counts the services' running tasks), with two
domains and their people."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from nats.js.errors import NotFoundError

from events.bus import Bus
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM
from schemas.tenancy import project_id_for
from services.storage.control.service import StorageService
from services.storage.settings import StorageSettings
from tests.integration.gateway_support import running_gateway
from tests.integration.storage_support import KEY
from tests.integration.vfolder_api.support import (
    TTL_S,
    World,
    _person,
    data_plane,
    ok,
)


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    root = tmp_path_factory.mktemp("vfolder-api")
    settings = StorageSettings(
        token_key=KEY, volumes={"local": {"backend": "local", "root": root / "local"}},
        default_volume="local", durable=f"storage-test-{new_id()[:8]}", poll_timeout_s=0.2,
        command_fetch_timeout_s=0.2, usage_interval_s=0.1,
    )  # fmt: skip
    service = StorageService(bus, settings)
    try:
        await service.start()
        async with (
            data_plane(service, settings) as storage_url,
            running_gateway(
                bus, root / "gateway", command_timeout_s=10.0, storage_url=storage_url,
                storage_token_key=KEY, storage_token_ttl_s=TTL_S,
            ) as gw,
        ):  # fmt: skip
            tag = new_id()[:6]
            domain, other = f"va-{tag}", f"vb-{tag}"
            for name in (domain, other):
                await ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=name)
                await ok(
                    gw,
                    'mutation($d: String!) { createProject(domain: $d, name: "lab") { id } }',
                    d=name,
                )
            tight = f"tight-{tag}"
            await ok(
                gw,
                """mutation($n: String!) { createResourcePolicy(kind: "user", name: $n,
                    storage: {maxQuotaScopeSize: "1000"}) { id } }""",
                n=tight,
            )
            lab = [project_id_for(domain, "lab")]
            people = {
                "alice": await _person(gw, "alice", domain, "user", lab),
                "bob": await _person(gw, "bob", domain, "user", lab),
                "carol": await _person(gw, "carol", domain, "user", []),
                "dave": await _person(gw, "dave", domain, "user", []),
                "tight": await _person(gw, "tight", domain, "user", [], tight),
                "admin": await _person(gw, "admin", domain, "admin", []),
                "monitor": await _person(gw, "monitor", domain, "monitor", []),
                "stranger": await _person(gw, "stranger", other, "user", []),
                "outsider": await _person(gw, "outsider", other, "admin", []),
            }
            await service.sync()  # the storage service knows every person before deciding
            yield World(gw, storage_url, domain, people)
    finally:
        await service.stop()
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(COMMANDS_STREAM, settings.durable)
