"""``vfolderAccess`` through a real gateway and the storage service's data plane: permissions,
quota and policy limits, the token's claims, and a token that really uploads and downloads."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from schemas.folder_tokens import Operation, verify
from tests.integration.storage_support import KEY, OCTETS, TUS, bearer
from tests.integration.vfolder_api.support import (
    TTL_S,
    World,
    act,
    create,
    get,
    ok,
    refused,
    unique,
)

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
    assert (found["files"], found["links"], found["otherEntries"]) == (1, 0, 0)
