"""The operators' queries tests' world: a real gateway per test module, two domains and their
people, and the history of ``support._history`` on the log.

The history is written straight to the log: one node of four GPUs in a resource group of this
module's own, 0.6 of GPU 0 held by alice's session, 0.6 of GPU 1 by carol's (another domain),
and alice's 2.6-GPU request waiting: 2.8 GPUs are free, but 2.6 as shares needs three GPUs
with 2.6 free between them (1 + 1 + 0.4)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from events.bus import Bus
from events.queues import QueueBoard
from events.store import EventStore
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from schemas.tenancy import SessionOwner
from tests.integration.gateway_support import gql_ok, person, running_gateway
from tests.integration.operator_gateway.support import (
    World,
    _history,
)
from tests.integration.test_usage import write
from tests.unit.usage_history import Cast


@pytest.fixture(scope="module")
async def world(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async with running_gateway(bus, tmp_path_factory.mktemp("operator")) as gw:
        tag = f"-{new_id()[:8]}"
        d1, d2 = f"d1{tag}", f"d2{tag}"
        for domain, project in ((d1, "one"), (d2, "three")):
            await gql_ok(gw, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
            await gql_ok(
                gw,
                "mutation($d: String!, $p: String!) { createProject(domain: $d, name: $p) { id } }",
                d=domain, p=project,
            )  # fmt: skip
        people: dict[str, SessionOwner] = {}
        auth: dict[str, JetyardAuth] = {"root": gw.root}
        emails: dict[str, str] = {}
        for name, domain, project, role in (
            ("alice", d1, "one", "user"), ("admin", d1, "one", "admin"),
            ("monitor", d1, "one", "monitor"), ("carol", d2, "three", "user"),
        ):  # fmt: skip
            people[name], auth[name], emails[name] = await person(gw, name, domain, project, role)
        cast = Cast(people=people, tag=tag)
        node, group = f"host{tag}", f"g{tag}"
        await write(EventStore(bus), _history(cast, node, group).events, {})
        await QueueBoard.on(bus).publish(group, [cast.id("s3")], 1)
        for _ in range(400):  # the views hold the history, the board the queue
            healthy = (await gw.client.get(f"{gw.url}/healthz")).status_code == 200
            if healthy and gw.services.queues.position(cast.id("s3")) is not None:
                break
            await asyncio.sleep(0.05)
        yield World(gw, cast, auth, emails, node, group)
