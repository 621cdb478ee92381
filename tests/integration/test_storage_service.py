"""The storage service's control part on a real NATS server and real files: ``cmd.vfolder.*``
in through the command bus, outcomes and ``ev.vfolder.*`` out, folders made, given quotas
and removed on disk, clones copied (and resumed after a restart), no purge while a live
session mounts a folder, usage measured after the data plane changed a folder, and the
owner's policy total enforced by the data plane."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.js.errors import NotFoundError

from commands.bus import CommandBus
from commands.folders.aggregate import VFolder
from commands.folders.messages import (
    AnswerVFolderInvitation,
    CloneVFolder,
    CreateVFolder,
    InviteToVFolder,
    PurgeVFolder,
    RenameVFolder,
    SetVFolderQuota,
    TrashVFolder,
)
from commands.messages import Command
from commands.outcome import Code, Outcome
from events.bus import Bus
from events.domain.session import SessionRequested, SessionTerminated
from events.domain.vfolder import VFolderCreated
from events.store import EventStore
from events.writes import AggregateRef
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import COMMANDS_STREAM, AggregateType
from schemas.vfolder import FolderStatus, Mount
from services.storage.control.service import StorageService
from services.storage.dataplane import create_app
from services.storage.settings import StorageSettings
from services.storage.volumes import LocalVolume
from tests.integration.storage_support import (
    HOSTNAME,
    KEY,
    OCTETS,
    TUS,
    bearer,
    person,
    token,
)
from tests.tenancy_support import record


@dataclass
class Storage:
    service: StorageService
    commands: CommandBus
    store: EventStore
    volume: LocalVolume

    async def run(self, cmd_type: type[Command], user: str, **fields: Any) -> Outcome:
        actor = Actor(kind=ActorKind.USER, id=user)
        cmd = cmd_type(actor=actor, tenant=SYSTEM_TENANT, **fields)
        outcome = await self.commands.execute(cmd, 15)
        assert outcome is not None, f"{cmd.command_name()} was not decided"
        return outcome

    async def ok(self, cmd_type: type[Command], user: str, **fields: Any) -> Outcome:
        outcome = await self.run(cmd_type, user, **fields)
        assert outcome.accepted, outcome.message
        return outcome

    async def create(self, user: str, name: str, **fields: Any) -> str:
        outcome = await self.ok(CreateVFolder, user, name=name, **fields)
        (folder_id,) = outcome.aggregate_ids
        return folder_id

    async def folder(self, folder_id: str) -> VFolder:
        history = await self.store.read(AggregateRef(AggregateType.VFOLDER, folder_id))
        folder = VFolder.rehydrate([e.envelope for e in history.events])
        assert folder is not None
        return folder

    def root(self, folder_id: str) -> Path:
        return self.volume.root / self.volume.folder_root(folder_id).relative_to(self.volume.root)


def settings_for(root: Path, durable: str) -> StorageSettings:
    return StorageSettings(
        token_key=KEY,
        hostname=HOSTNAME,
        volumes={"local": {"backend": "local", "root": root}},
        default_volume="local",
        durable=durable,
        poll_timeout_s=0.2,
        command_fetch_timeout_s=0.2,
        usage_interval_s=0.1,
    )


StartStorage = Callable[[], Awaitable[StorageService]]


@pytest.fixture
async def start_storage(bus: Bus, tmp_path: Path) -> AsyncIterator[StartStorage]:
    """Storage services on one volume and one fresh durable (one at a time: the work queue
    allows one consumer of ``cmd.vfolder.*``); each stopped, the durable removed."""
    settings = settings_for(tmp_path / "local", f"storage-{new_id()[:8]}")
    running: list[StorageService] = []

    async def start() -> StorageService:
        service = StorageService(bus, settings)
        await service.start()
        running.append(service)
        return service

    try:
        yield start
    finally:
        for service in running:
            await service.stop()
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(COMMANDS_STREAM, settings.durable)


@pytest.fixture
async def storage(bus: Bus, start_storage: StartStorage) -> Storage:
    service = await start_storage()
    volume = service.volumes["local"]
    assert isinstance(volume, LocalVolume)
    return Storage(service, CommandBus(bus), EventStore(bus), volume)


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_a_folder_lives_through_its_commands_and_on_disk(storage: Storage) -> None:
    _, ada = await person(storage.store)
    _, bob = await person(storage.store)
    folder_id = await storage.create(ada, "data", quota_bytes=1 << 20)
    assert storage.volume.folder_root(folder_id).is_dir()
    assert storage.volume.quota(folder_id) == 1 << 20

    await storage.ok(RenameVFolder, ada, folder_id=folder_id, name="results")
    await storage.ok(SetVFolderQuota, ada, folder_id=folder_id, quota_bytes=2 << 20)
    await eventually(lambda: _is(storage.volume.quota(folder_id) == 2 << 20))
    folder = await storage.folder(folder_id)
    assert (folder.name, folder.quota_bytes, folder.status) == (
        "results", 2 << 20, FolderStatus.READY,
    )  # fmt: skip

    # Bob is of another domain: invited, he is "not found" (as if there were no Bob).
    refused = await storage.run(InviteToVFolder, ada, folder_id=folder_id, user_id=bob)
    assert refused.code == Code.NOT_FOUND, refused.message
    _, cy = await person(storage.store, domain=(await storage.folder(folder_id)).domain)
    await storage.ok(InviteToVFolder, ada, folder_id=folder_id, user_id=cy, permission="rw")
    await storage.ok(AnswerVFolderInvitation, cy, folder_id=folder_id, accept=True)
    assert (await storage.folder(folder_id)).shares == {cy: "rw"}

    await storage.ok(TrashVFolder, ada, folder_id=folder_id)
    assert storage.volume.folder_root(folder_id).is_dir()  # trashed: the bytes stay
    await storage.ok(PurgeVFolder, ada, folder_id=folder_id)
    await eventually(lambda: _is(not _exists(storage.volume, folder_id)))
    assert (await storage.folder(folder_id)).status is FolderStatus.PURGED


async def test_a_name_is_unique_per_owner(storage: Storage) -> None:
    _, ada = await person(storage.store, max_folders=2)
    first = await storage.create(ada, "data")
    clash = await storage.run(CreateVFolder, ada, name="data")
    assert clash.code == Code.CONFLICT, clash.message
    assert "exists already" in clash.message
    await storage.create(ada, "other")
    third = await storage.run(CreateVFolder, ada, name="third")
    assert third.code == Code.QUOTA, third.message
    assert (await storage.folder(first)).name == "data"


async def test_no_purge_while_a_live_session_mounts_the_folder(storage: Storage) -> None:
    _, ada = await person(storage.store)
    folder_id = await storage.create(ada, "mounted")
    session_id = new_id()
    mount = Mount(
        folder_id=folder_id, name="mounted", volume="local", path="/home/work/mounted",
        read_only=False,
    )  # fmt: skip
    await _session(storage.store, session_id, mount)
    refused = await storage.run(TrashVFolder, ada, folder_id=folder_id)
    assert refused.code == Code.REFUSED, refused.message
    assert "mounted by a live session" in refused.message

    written = storage.root(folder_id)
    (written / "written-by-the-session.bin").write_bytes(b"x" * 1234)
    os.link(written / "written-by-the-session.bin", written / "same-file.bin")
    (written / "a-link").symlink_to("same-file.bin")
    os.mkfifo(written / "a-pipe")
    await record(storage.store, AggregateType.SESSION, session_id, SessionTerminated(reason="done"))
    # A read-write session ended: the folder is measured (what it wrote through its mount):
    # a file of two names (its bytes once), a symlink and a FIFO.
    await eventually(lambda: _bytes_are(storage, folder_id, 1234))
    measured = await storage.folder(folder_id)
    assert (measured.files, measured.links, measured.others) == (2, 1, 1)
    await storage.ok(TrashVFolder, ada, folder_id=folder_id)
    await storage.ok(PurgeVFolder, ada, folder_id=folder_id)
    await eventually(lambda: _is(not _exists(storage.volume, folder_id)))


async def test_a_clone_copies_the_bytes_and_ends_ready(storage: Storage) -> None:
    _, ada = await person(storage.store)
    source = await storage.create(ada, "source")
    root = storage.root(source)
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "weights.bin").write_bytes(b"w" * 100_000)
    (root / "top.txt").write_text("hello")
    (root / "link").symlink_to("/etc/passwd")  # copied as a link, never followed

    outcome = await storage.ok(CloneVFolder, ada, folder_id=source, name="copy")
    (clone_id,) = outcome.aggregate_ids
    await eventually(lambda: _status_is(storage, clone_id, FolderStatus.READY))
    clone = await storage.folder(clone_id)
    assert (clone.bytes_used, clone.files, clone.links, clone.cloned_from) == (
        100_005, 2, 1, source,
    )  # fmt: skip
    copied = storage.root(clone_id)
    assert (copied / "a" / "b" / "weights.bin").read_bytes() == b"w" * 100_000
    assert (copied / "top.txt").read_text() == "hello"
    assert (copied / "link").is_symlink() and str((copied / "link").readlink()) == "/etc/passwd"

    clash = await storage.run(CloneVFolder, ada, folder_id=source, name="copy")
    assert clash.code == Code.CONFLICT, clash.message
    _, eve = await person(storage.store)
    unseen = await storage.run(CloneVFolder, eve, folder_id=source, name="mine")
    assert unseen.code == Code.NOT_FOUND, unseen.message


async def test_a_clone_still_cloning_is_copied_at_the_next_start(
    bus: Bus, start_storage: StartStorage, tmp_path: Path
) -> None:
    store = EventStore(bus)
    domain, ada = await person(store)
    first = await start_storage()
    storage = Storage(first, CommandBus(bus), store, first.volumes["local"])  # type: ignore[arg-type]
    source = await storage.create(ada, "source")
    (storage.root(source) / "data.bin").write_bytes(b"d" * 4096)
    await first.stop()
    # Written as if a service had accepted the clone and died before copying anything.
    clone_id = f"clone-{new_id()[:8]}"
    created = VFolderCreated(
        name="copy", owner_kind="user", owner_id=ada, domain=domain, volume="local",
        creator=ada, cloned_from=source,
    )  # fmt: skip
    await record(store, AggregateType.VFOLDER, clone_id, created)
    await start_storage()
    await eventually(lambda: _status_is(storage, clone_id, FolderStatus.READY))
    assert (storage.root(clone_id) / "data.bin").read_bytes() == b"d" * 4096
    assert (await storage.folder(clone_id)).bytes_used == 4096


async def test_usage_is_measured_after_an_upload_and_the_policy_total_holds(
    storage: Storage,
) -> None:
    _, ada = await person(storage.store, max_total_bytes=1000)
    folder_id = await storage.create(ada, "uploads")
    app = create_app(storage.service.settings, storage.service.volumes, storage.service.hooks())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://storage") as client:
        base = f"/folders/local/{folder_id}"
        assert (await _upload(client, base, folder_id, "one.bin", 600)).status_code == 204
        await eventually(lambda: _bytes_are(storage, folder_id, 600))
        assert (await storage.folder(folder_id)).files == 1

        # 600 held of the policy's 1000: 500 more do not fit, anywhere of this owner's.
        refused = await _create_upload(client, base, folder_id, "two.bin", 500)
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"] == "policy_total_exceeded"
        assert "1000 bytes" in refused.json()["message"]
        assert (await _upload(client, base, folder_id, "two.bin", 400)).status_code == 204
        await eventually(lambda: _bytes_are(storage, folder_id, 1000))

        deleted = await client.post(
            f"{base}/delete", headers=bearer(token("delete", folder_id, "one.bin")), json={}
        )
        assert deleted.status_code == 200, deleted.text
        await eventually(lambda: _bytes_are(storage, folder_id, 400))


async def test_uploads_in_progress_and_just_finished_count_in_the_owners_total(
    storage: Storage,
) -> None:
    _, ada = await person(storage.store, max_total_bytes=1000)
    first, second = await storage.create(ada, "first"), await storage.create(ada, "second")
    app = create_app(storage.service.settings, storage.service.volumes, storage.service.hooks())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://storage") as client:
        held = await _create_upload(client, f"/folders/local/{first}", first, "a.bin", 600)
        assert held.status_code == 201, held.text
        # Another folder of the same owner: the reservation spans the owner's folders.
        refused = await _create_upload(client, f"/folders/local/{second}", second, "b.bin", 500)
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"] == "policy_total_exceeded"
        assert "600 are reserved by uploads in progress" in refused.json()["message"]

        headers = {
            **TUS, **bearer(token("upload", first, "a.bin")), "Upload-Offset": "0",
            "Content-Type": OCTETS,
        }  # fmt: skip
        done = await client.patch(held.headers["location"], headers=headers, content=b"a" * 600)
        assert done.status_code == 204, done.text
        # Finished, measured or not yet: the 600 bytes count either way.
        again = await _create_upload(client, f"/folders/local/{second}", second, "b.bin", 500)
        assert again.status_code == 413, again.text
        await eventually(lambda: _bytes_are(storage, first, 600))
        # Once that measurement is folded, the landed bytes are not counted twice.
        await eventually(lambda: _is(_room_used(storage, first) == 600))
        assert (
            await _upload(client, f"/folders/local/{second}", second, "b.bin", 400)
        ).status_code == 204


# ---- helpers ------------------------------------------------------------------------------


async def _is(value: bool) -> bool:
    return value


def _room_used(storage: Storage, folder_id: str) -> int | None:
    room = storage.service.owner_room(folder_id)
    return None if room is None else room.used


def _exists(volume: LocalVolume, folder_id: str) -> bool:
    try:
        volume.folder_root(folder_id)
    except LookupError:
        return False
    return True


async def _bytes_are(storage: Storage, folder_id: str, expected: int) -> bool:
    return (await storage.folder(folder_id)).bytes_used == expected


async def _status_is(storage: Storage, folder_id: str, status: FolderStatus) -> bool:
    return (await storage.folder(folder_id)).status is status


async def _session(store: EventStore, session_id: str, *mounts: Mount) -> None:
    spec = SessionSpec(
        image="img",
        kernels=(KernelSpec(resources=ResourceSlots(cpu_milli=100)),),
        command=("sleep", "60"),
    )
    requested = SessionRequested(spec=spec, kernel_ids=(new_id(),), mounts=mounts)
    await record(store, AggregateType.SESSION, session_id, requested)


async def _create_upload(
    client: httpx.AsyncClient, base: str, folder_id: str, path: str, length: int
) -> httpx.Response:
    grant = token("upload", folder_id, path)
    headers = {**TUS, **bearer(grant), "Upload-Length": str(length)}
    return await client.post(f"{base}/uploads", headers=headers)


async def _upload(
    client: httpx.AsyncClient, base: str, folder_id: str, path: str, length: int
) -> httpx.Response:
    created = await _create_upload(client, base, folder_id, path, length)
    assert created.status_code == 201, created.text
    headers = {
        **TUS, **bearer(token("upload", folder_id, path)), "Upload-Offset": "0",
        "Content-Type": OCTETS,
    }  # fmt: skip
    return await client.patch(created.headers["location"], headers=headers, content=b"u" * length)
