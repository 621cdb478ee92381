"""The virtual folder API through a real gateway, with the storage service deciding
``cmd.vfolder.*`` and serving its data plane, on a real nats-server and real files: every
mutation's round trip, listings (pages, filters), who sees what (another user's folder is not
found, a share shows its permission, an admin of another domain sees nothing), ``mountedBy``,
and ``vfolderAccess`` (permissions, quota and policy limits, the token's claims, and a token
that really uploads and downloads through the data plane)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from nats.js.errors import NotFoundError

from events.bus import Bus
from events.domain.session import SessionRequested, SessionTerminated
from events.store import EventStore
from jetyard.natsserver import free_port
from jetyard.sdk import JetyardAuth
from schemas.folder_tokens import Operation, verify
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import COMMANDS_STREAM, AggregateType
from schemas.tenancy import project_id_for
from schemas.vfolder import Mount
from services.storage.control.service import StorageService
from services.storage.dataplane import create_app
from services.storage.settings import StorageSettings
from tests.integration.gateway_support import Gateway, running_gateway
from tests.integration.storage_support import KEY, OCTETS, TUS, bearer
from tests.tenancy_support import record

FOLDER = """id name ownerKind ownerId domain volume usageMode status quotaBytes bytesUsed
    files permission clonedFrom createdAt updatedAt shares { userId permission }
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


async def test_a_folder_is_created_renamed_given_a_quota_trashed_and_purged(world: World) -> None:
    alice = world.people["alice"]
    name = unique("data")
    key = new_id()
    folder = await create(world, "alice", name, quotaBytes=1_000_000, clientCommandId=key)
    assert {k: folder[k] for k in ("name", "ownerKind", "ownerId", "domain", "volume")} == {
        "name": name, "ownerKind": "user", "ownerId": alice.user_id, "domain": world.domain,
        "volume": "local",
    }  # fmt: skip
    assert (folder["usageMode"], folder["status"], folder["quotaBytes"]) == (
        "general", "ready", 1_000_000,
    )  # fmt: skip
    assert (folder["bytesUsed"], folder["files"], folder["permission"]) == (0, 0, "rwd")
    assert (folder["clonedFrom"], folder["shares"], folder["mountedBy"]) == (None, [], [])
    again = await create(world, "alice", name, quotaBytes=1_000_000, clientCommandId=key)
    assert again["id"] == folder["id"]  # the same command: the same folder
    assert await refused(world.gw, CREATE, alice.auth, i={"name": name}) == "conflict"
    assert await refused(world.gw, CREATE, alice.auth, i={"name": "a/b"}) == "invalid"

    fid, renamed = folder["id"], unique("results")
    out = await act(world, "alice", "renameVFolder", "", id=fid, name=renamed)
    assert out["folder"]["name"] == renamed and out["message"].endswith("renamed")
    by_name = await get(world, "alice", renamed)
    assert by_name is not None and by_name["id"] == fid
    out = await act(world, "alice", "setVFolderQuota", "id: $id, quotaBytes: null", id=fid)
    assert out["folder"]["quotaBytes"] is None
    out = await act(world, "alice", "setVFolderQuota", "", id=fid, quotaBytes=2048.0)
    assert out["folder"]["quotaBytes"] == 2048

    out = await act(world, "alice", "trashVFolder", "", id=fid, reason="done")
    assert out["folder"]["status"] == "trashed"
    out = await act(world, "alice", "restoreVFolder", "", id=fid)
    assert out["folder"]["status"] == "ready"
    await act(world, "alice", "trashVFolder", "", id=fid)
    out = await act(world, "alice", "purgeVFolder", "", id=fid)
    assert out["folder"]["status"] == "purged"
    listed = await ok(world.gw, "{ vfolders(first: 500) { edges { node { id } } } }", alice.auth)
    assert fid not in [e["node"]["id"] for e in listed["vfolders"]["edges"]]
    gone = await get(world, "alice", fid)
    assert gone is not None and gone["status"] == "purged"
    assert await get(world, "alice", "no/such") is None


async def test_a_share_is_offered_answered_left_and_revoked(world: World) -> None:
    carol = world.people["carol"]
    folder = await create(world, "alice", unique("shared"))
    fid = folder["id"]
    out = await act(
        world, "alice", "inviteToVFolder", "", id=fid, user=carol.email, permission="rw"
    )
    assert out["folder"]["invitations"] == [{"userId": carol.user_id, "permission": "rw"}]
    offered = await get(world, "carol", fid)
    assert offered is not None and offered["permission"] is None  # not accepted yet
    out = await act(world, "carol", "answerVFolderInvitation", "", id=fid, accept=True)
    assert out["folder"]["shares"] == [{"userId": carol.user_id, "permission": "rw"}]
    assert out["folder"]["permission"] == "rw" and out["folder"]["invitations"] == []
    by_name = await get(world, "carol", folder["name"])  # a name shared with her resolves
    assert by_name is not None and by_name["id"] == fid
    out = await act(world, "carol", "leaveVFolder", "", id=fid)
    assert out["folder"] is None  # she no longer sees it
    assert await get(world, "carol", fid) is None

    await act(world, "alice", "inviteToVFolder", "", id=fid, user=carol.user_id)
    await act(world, "carol", "answerVFolderInvitation", "", id=fid, accept=True)
    shared = await get(world, "carol", fid)
    assert shared is not None and shared["permission"] == "ro"
    out = await act(world, "alice", "revokeVFolderShare", "", id=fid, user=carol.email)
    assert out["folder"]["shares"] == []
    assert await get(world, "carol", fid) is None

    invite = "mutation($id: String!, $u: String!) { inviteToVFolder(id: $id, user: $u) { status } }"
    stranger = world.people["stranger"]
    alice = world.auth("alice")
    assert await refused(world.gw, invite, alice, id=fid, u=stranger.email) == "not-found"
    assert await refused(world.gw, invite, alice, id=fid, u="nobody@example.org") == "not-found"


async def test_a_clone_becomes_ready_and_belongs_to_its_maker(world: World) -> None:
    source = await create(world, "alice", unique("source"), usageMode="model")
    await act(
        world, "alice", "inviteToVFolder", "", id=source["id"], user=world.people["bob"].email
    )
    await act(world, "bob", "answerVFolderInvitation", "", id=source["id"], accept=True)
    name = unique("copy")
    out = await act(world, "bob", "cloneVFolder", "", id=source["id"], name=name)
    clone = out["folder"]
    assert clone["clonedFrom"] == source["id"] and clone["ownerId"] == world.people["bob"].user_id
    assert clone["usageMode"] == "model" and clone["status"] in {"cloning", "ready"}
    deadline = time.monotonic() + 20
    while (found := await get(world, "bob", clone["id"])) is None or found["status"] != "ready":
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.1)
    clone_of = 'mutation($id: String!) { cloneVFolder(id: $id, name: "x") { status } }'
    code = await refused(world.gw, clone_of, world.auth("stranger"), id=source["id"])
    assert code == "not-found"


async def test_who_sees_which_folder(world: World) -> None:
    gw = world.gw
    own = await create(world, "alice", unique("private"))
    team = await create(world, "alice", unique("team"), ownerKind="project", project="lab")
    assert team["ownerKind"] == "project" and team["permission"] == "rw"
    assert team["ownerId"] == project_id_for(world.domain, "lab")

    bob_sees = await get(world, "bob", team["id"])
    assert bob_sees is not None and bob_sees["permission"] == "rw"
    assert await get(world, "bob", own["id"]) is None
    assert await get(world, "carol", team["id"]) is None
    admin_sees = await get(world, "admin", own["id"])
    assert admin_sees is not None and admin_sees["permission"] == "rwd"
    monitor_sees = await get(world, "monitor", own["id"])
    assert monitor_sees is not None and monitor_sees["permission"] is None
    monitor = world.auth("monitor")
    assert await refused(gw, CREATE, monitor, i={"name": unique("m")}) == "forbidden"
    assert await get(world, "stranger", own["id"]) is None
    rename = 'mutation($id: String!) { renameVFolder(id: $id, name: "mine") { status } }'
    assert await refused(gw, rename, world.auth("stranger"), id=own["id"]) == "not-found"
    # Bob may use the project folder, not manage it.
    assert await refused(gw, rename, world.auth("bob"), id=team["id"]) == "forbidden"

    listing = "{ vfolders(first: 500) { totalCount edges { node { id domain } } } }"
    outsider = (await ok(gw, listing, world.auth("outsider")))["vfolders"]
    assert all(e["node"]["domain"] != world.domain for e in outsider["edges"])
    admin = (await ok(gw, listing, world.auth("admin")))["vfolders"]
    assert {own["id"], team["id"]} <= {e["node"]["id"] for e in admin["edges"]}
    everything = (await ok(gw, listing))["vfolders"]
    assert {own["id"], team["id"]} <= {e["node"]["id"] for e in everything["edges"]}


async def test_folders_come_a_page_at_a_time_with_filters(world: World) -> None:
    gw, dave = world.gw, world.auth("dave")
    made = [await create(world, "dave", unique(f"f{i}")) for i in range(5)]
    await act(world, "dave", "trashVFolder", "", id=made[4]["id"])
    page = """query($after: String, $s: String, $n: String, $k: String) {
        vfolders(first: 2, after: $after, status: $s, name: $n, ownerKind: $k) {
        totalCount pageInfo { hasNextPage endCursor } edges { cursor node { id } } } }"""
    seen: list[str] = []
    after = None
    while True:
        got = (await ok(gw, page, dave, after=after))["vfolders"]
        assert got["totalCount"] == 5
        seen += [e["node"]["id"] for e in got["edges"]]
        if not got["pageInfo"]["hasNextPage"]:
            break
        after = got["pageInfo"]["endCursor"]
        assert after == got["edges"][-1]["cursor"]
    assert seen == [f["id"] for f in made]
    trashed = (await ok(gw, page, dave, s="trashed"))["vfolders"]
    assert [e["node"]["id"] for e in trashed["edges"]] == [made[4]["id"]]
    named = (await ok(gw, page, dave, n=made[2]["name"]))["vfolders"]
    assert [e["node"]["id"] for e in named["edges"]] == [made[2]["id"]]
    assert (await ok(gw, page, dave, k="project"))["vfolders"]["totalCount"] == 0
    assert await refused(gw, page, dave, s="lost") == "invalid"
    assert await refused(gw, page, dave, after="bm90LWEtY3Vyc29y") == "invalid"
    team = await create(world, "alice", unique("lab"), ownerKind="project", project="lab")
    in_lab = """{ vfolders(project: "lab") { edges { node { id ownerKind } } } }"""
    bobs = (await ok(gw, in_lab, world.auth("bob")))["vfolders"]["edges"]
    assert team["id"] in [e["node"]["id"] for e in bobs]
    assert {e["node"]["ownerKind"] for e in bobs} == {"project"}


async def test_mounted_by_names_live_sessions_to_the_owner_only(world: World, bus: Bus) -> None:
    folder = await create(world, "alice", unique("mounted"))
    fid = folder["id"]
    await act(world, "alice", "inviteToVFolder", "", id=fid, user=world.people["carol"].email)
    await act(world, "carol", "answerVFolderInvitation", "", id=fid, accept=True)
    session_id = new_id()
    spec = SessionSpec(image="img", kernels=(KernelSpec(resources=ResourceSlots(cpu_milli=100)),))
    mount = Mount(folder_id=fid, name=folder["name"], volume="local", path="/data", read_only=False)
    store = EventStore(bus)
    requested = SessionRequested(spec=spec, kernel_ids=(new_id(),), mounts=(mount,))
    await record(store, AggregateType.SESSION, session_id, requested)
    assert await world.gw.services.views.wait_for(await store.stream_last_seq(), 5.0)
    assert (await get(world, "alice", fid) or {})["mountedBy"] == [session_id]
    assert (await get(world, "admin", fid) or {})["mountedBy"] == [session_id]
    assert (await get(world, "carol", fid) or {})["mountedBy"] == []
    trash = "mutation($id: String!) { trashVFolder(id: $id) { status } }"
    assert await refused(world.gw, trash, world.auth("alice"), id=fid) == "refused"
    await record(store, AggregateType.SESSION, session_id, SessionTerminated(reason="done"))
    assert await world.gw.services.views.wait_for(await store.stream_last_seq(), 5.0)
    assert (await get(world, "alice", fid) or {})["mountedBy"] == []


ACCESS = """mutation($id: String!, $op: String!, $path: String!, $size: Float, $prefix: Boolean!) {
    vfolderAccess(id: $id, operation: $op, path: $path, size: $size, prefix: $prefix) {
    url token expiresAt operation path maxBytes } }"""


async def access(
    world: World, who: str, fid: str, op: str, path: str = "", size: float | None = None,
    prefix: bool = False,
) -> dict[str, Any]:  # fmt: skip
    data = await ok(
        world.gw, ACCESS, world.auth(who), id=fid, op=op, path=path, size=size, prefix=prefix
    )
    grant: dict[str, Any] = data["vfolderAccess"]
    return grant


async def access_refused(
    world: World, who: str, fid: str, op: str, path: str = "", size: float | None = None
) -> str:
    variables = {"id": fid, "op": op, "path": path, "size": size, "prefix": False}
    return await refused(world.gw, ACCESS, world.auth(who), **variables)


async def test_access_tokens_follow_permissions_and_limits(world: World) -> None:
    folder = await create(world, "alice", unique("files"), quotaBytes=1000)
    fid = folder["id"]
    before = time.time()
    grant = await access(world, "alice", fid, "upload", "in/a.bin", size=100)
    assert grant["url"] == f"{world.storage_url}/folders/local/{fid}/uploads"
    assert (grant["operation"], grant["path"], grant["maxBytes"]) == ("upload", "in/a.bin", 100)
    claims = verify(KEY.encode(), grant["token"], now=time.time(), max_ttl_s=TTL_S + 5)
    assert (claims.op, claims.volume, claims.folder, claims.path) == (
        Operation.UPLOAD, "local", fid, "in/a.bin",
    )  # fmt: skip
    assert claims.once and claims.max_bytes == 100 and not claims.prefix
    assert before + TTL_S - 2 <= claims.exp <= time.time() + TTL_S + 1
    unsized = await access(world, "alice", fid, "upload", "in/b.bin")
    assert unsized["maxBytes"] == 1000  # the folder quota left
    listing = await access(world, "alice", fid, "list", "in", prefix=True)
    claims = verify(KEY.encode(), listing["token"], now=time.time(), max_ttl_s=TTL_S + 5)
    assert claims.prefix and not claims.once and claims.max_bytes is None
    assert listing["url"].endswith(f"/{fid}/list")

    assert await access_refused(world, "alice", fid, "upload", "big.bin", size=1001) == (
        "quota-exceeded"
    )
    assert await access_refused(world, "alice", fid, "upload", "../x") == "invalid"
    assert await access_refused(world, "alice", fid, "upload", "/etc/passwd") == "invalid"
    assert await access_refused(world, "alice", fid, "chmod") == "invalid"
    assert await access_refused(world, "alice", fid, "upload", "x", size=1.5) == "invalid"
    assert await access_refused(world, "alice", fid, "upload", "x", size=1e300) == "invalid"
    assert await access_refused(world, "alice", fid, "upload", "x", size=-5) == "invalid"

    # A read-only sharer reads, and writes nothing.
    carol = world.people["carol"]
    await act(world, "alice", "inviteToVFolder", "", id=fid, user=carol.email)
    await act(world, "carol", "answerVFolderInvitation", "", id=fid, accept=True)
    assert (await access(world, "carol", fid, "download", "in/a.bin"))["maxBytes"] is None
    assert await access_refused(world, "carol", fid, "upload", "c.bin", size=1) == "forbidden"
    assert await access_refused(world, "carol", fid, "delete", "in") == "forbidden"
    assert await access_refused(world, "stranger", fid, "download", "in/a.bin") == "not-found"
    assert await access_refused(world, "monitor", fid, "list") == "forbidden"

    # The owner's policy total (1000 bytes across the folders of "tight").
    roomy = await create(world, "tight", unique("roomy"))
    assert (await access(world, "tight", roomy["id"], "upload", "x"))["maxBytes"] == 1000
    code = await access_refused(world, "tight", roomy["id"], "upload", "x", size=1001)
    assert code == "quota-exceeded"

    await act(world, "alice", "trashVFolder", "", id=fid)
    assert await access_refused(world, "alice", fid, "download", "in/a.bin") == "refused"

    services = world.gw.services
    keyed = services.settings
    services.settings = keyed.model_copy(update={"storage_token_key": None})
    try:
        assert await access_refused(world, "alice", fid, "list") == "unavailable"
    finally:
        services.settings = keyed


async def test_a_token_uploads_and_downloads_through_the_data_plane(world: World) -> None:
    folder = await create(world, "alice", unique("transfer"))
    fid = folder["id"]
    body = bytes(range(256)) * 40 + b"tail"
    grant = await access(world, "alice", fid, "upload", "results/out.bin", size=len(body))
    async with httpx.AsyncClient(timeout=20) as client:
        headers = {**TUS, **bearer(grant["token"]), "Upload-Length": str(len(body))}
        created = await client.post(grant["url"], headers=headers)
        assert created.status_code == 201, created.text
        location = world.storage_url + created.headers["location"]
        sent = await client.patch(
            location,
            headers={**TUS, **bearer(grant["token"]), "Upload-Offset": "0", "Content-Type": OCTETS},
            content=body,
        )
        assert sent.status_code == 204, sent.text
        again = await client.post(grant["url"], headers=headers)
        assert again.status_code == 401 and again.json()["error"] == "token_used"

        down = await access(world, "alice", fid, "download", "results/out.bin")
        got = await client.get(down["url"], params={"path": "results/out.bin"},
                               headers=bearer(down["token"]))  # fmt: skip
        assert got.status_code == 200 and got.content == body
        listing = await access(world, "alice", fid, "list", "results")
        listed = await client.get(listing["url"], headers=bearer(listing["token"]))
        assert [e["name"] for e in listed.json()["entries"]] == ["out.bin"]

    # The storage service measures the folder after the upload; the API shows it.
    deadline = time.monotonic() + 15
    while (found := await get(world, "alice", fid)) is None or found["bytesUsed"] != len(body):
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.1)
    assert found["files"] == 1
