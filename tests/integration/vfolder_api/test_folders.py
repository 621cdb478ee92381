"""The virtual folder API through a real gateway, with the storage service deciding
``cmd.vfolder.*``, on a real nats-server and real files: every mutation's round trip, listings
(pages, filters), who sees what (another user's folder is not found, a share shows its
permission, an admin of another domain sees nothing) and ``mountedBy``."""

from __future__ import annotations

import asyncio
import time

from events.bus import Bus
from events.domain.session import SessionRequested, SessionTerminated
from events.store import EventStore
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import project_id_for
from schemas.vfolder import Mount
from tests.integration.vfolder_api.support import (
    CREATE,
    World,
    act,
    create,
    get,
    ok,
    refused,
    unique,
)
from tests.tenancy_support import record


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
    assert (folder["links"], folder["otherEntries"]) == (0, 0)
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
    # At once, with no wait: the storage service may not have read the session yet, and
    # must still refuse (it folds to the log's end before a trash).
    trash = "mutation($id: String!) { trashVFolder(id: $id) { status } }"
    assert await refused(world.gw, trash, world.auth("alice"), id=fid) == "refused"
    assert await world.gw.services.views.wait_for(await store.stream_last_seq(), 5.0)
    assert (await get(world, "alice", fid) or {})["mountedBy"] == [session_id]
    assert (await get(world, "admin", fid) or {})["mountedBy"] == [session_id]
    assert (await get(world, "carol", fid) or {})["mountedBy"] == []
    await record(store, AggregateType.SESSION, session_id, SessionTerminated(reason="done"))
    assert await world.gw.services.views.wait_for(await store.stream_last_seq(), 5.0)
    assert (await get(world, "alice", fid) or {})["mountedBy"] == []
