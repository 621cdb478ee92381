"""The folder API tests' world and helpers: the people, GraphQL calls that must succeed or be
refused, creating and acting on folders, and the storage data plane in this process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from jetyard.runtime.natsserver import free_port
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id
from services.storage.control.service import StorageService
from services.storage.dataplane import create_app
from services.storage.settings import StorageSettings
from tests.integration.gateway_support import Gateway

FOLDER = """id name ownerKind ownerId domain volume usageMode status quotaBytes bytesUsed
    files links otherEntries permission clonedFrom createdAt updatedAt shares { userId permission }
    invitations { userId permission } mountedBy"""
OUTCOME = f"commandId status code message folder {{ {FOLDER} }}"
TTL_S = 120.0


@dataclass
class Person:
    user_id: str
    email: str
    auth: JetyardAuth


@dataclass
class World:
    gw: Gateway
    storage_url: str
    domain: str
    people: dict[str, Person]

    def auth(self, name: str) -> JetyardAuth:
        return self.gw.root if name == "root" else self.people[name].auth


async def ok(gw: Gateway, query: str, auth: httpx.Auth | None = None, **variables: Any) -> Any:
    body = await gw.gql(query, auth=auth, **variables)
    assert "errors" not in body, body
    return body["data"]


async def refused(gw: Gateway, query: str, auth: httpx.Auth | None = None, **variables: Any) -> str:
    """The code of the error the call is refused with (it must be refused)."""
    body = await gw.gql(query, auth=auth, **variables)
    assert body.get("errors"), body
    return str(body["errors"][0]["extensions"]["code"])


async def _person(
    gw: Gateway, name: str, domain: str, role: str, projects: list[str], policy: str = "default"
) -> Person:
    email = f"{name}-{new_id()[:6]}@example.org"
    made = await ok(
        gw,
        """mutation($e: String!, $d: String!, $r: String!, $p: [ID!], $pol: String!) {
            createUser(email: $e, password: "pw-123456", domain: $d, role: $r, projects: $p,
                       policy: $pol) { id } }""",
        e=email, d=domain, r=role, p=projects, pol=policy,
    )  # fmt: skip
    user_id = made["createUser"]["id"]
    issued = await ok(
        gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }", u=user_id
    )
    keys = issued["createKeypair"]
    return Person(user_id, email, JetyardAuth(keys["accessKey"], keys["secretKey"]))


@contextlib.asynccontextmanager
async def data_plane(service: StorageService, settings: StorageSettings) -> AsyncIterator[str]:
    """The storage service's data plane in this process, sharing its volumes and hooks."""
    port = free_port()
    app = create_app(settings, service.volumes, service.hooks())
    server = uvicorn.Server(uvicorn.Config(app, port=port, lifespan="on", log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn exposes no start event)
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


CREATE = f"""mutation($i: CreateVFolderInput!) {{ createVFolder(input: $i) {{ {OUTCOME} }} }}"""
GET = f"query($id: String!) {{ vfolder(id: $id) {{ {FOLDER} }} }}"


async def create(world: World, who: str, name: str, **fields: Any) -> dict[str, Any]:
    data = await ok(world.gw, CREATE, world.auth(who), i={"name": name, **fields})
    outcome = data["createVFolder"]
    assert outcome["status"] == "ACCEPTED", outcome
    folder: dict[str, Any] = outcome["folder"]
    return folder


async def act(world: World, who: str, mutation: str, args: str, **variables: Any) -> Any:
    """Run a folder mutation ``mutation(args)``; its outcome (accepted)."""
    params = ", ".join(f"${k}: {_type(v)}" for k, v in variables.items())
    passed = args or ", ".join(f"{k}: ${k}" for k in variables)
    query = f"mutation({params}) {{ {mutation}({passed}) {{ {OUTCOME} }} }}"
    data = await ok(world.gw, query, world.auth(who), **variables)
    outcome = data[mutation]
    assert outcome["status"] == "ACCEPTED", outcome
    return outcome


def _type(value: Any) -> str:
    if isinstance(value, bool):
        return "Boolean!"
    if isinstance(value, float | int):
        return "Float"
    return "String!"


async def get(world: World, who: str, ref: str) -> dict[str, Any] | None:
    data = await ok(world.gw, GET, world.auth(who), id=ref)
    found: dict[str, Any] | None = data["vfolder"]
    return found


def unique(name: str) -> str:
    return f"{name}-{new_id()[:6]}"
