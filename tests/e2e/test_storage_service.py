"""``jetyard serve storage`` as a process of its own, with its own nats-server: a 2 GiB upload
broken half way and resumed with a fresh token (complete, the right SHA-256, resident memory
sampled throughout), and the process killed mid-upload and started again (the upload resumes
from HEAD's offset; the usage the log records agrees with the files)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from commands.bus import CommandBus
from commands.folders.messages import CreateVFolder
from events.bus import connect, ensure_streams
from events.store import EventStore
from events.writes import AggregateRef
from jetyard.runtime.natsserver import NatsServer, free_port
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.settings import NatsSettings
from schemas.subjects import AggregateType
from services.storage.volumes import LocalVolume
from tests.integration.storage_support import (
    HOSTNAME,
    KEY,
    OCTETS,
    TUS,
    bearer,
    offset_of,
    person,
    token,
)

MiB = 1 << 20
GiB = 1 << 30
BLOCK = os.urandom(MiB)
RSS_LIMIT_KIB = 100 * 1024


def chunk(index: int) -> bytes:
    """The ``index``-th MiB of a test file: random, and different from every other MiB."""
    return index.to_bytes(8, "big") + BLOCK[8:]


def body(start: int, end: int) -> Iterator[bytes]:
    """Bytes ``start`` to ``end`` of the test file, generated (never all in memory)."""
    position = start
    while position < end:
        index, skip = divmod(position, MiB)
        piece = chunk(index)[skip : skip + end - position]
        position += len(piece)
        yield piece


def sha256_of(length: int) -> str:
    digest = hashlib.sha256()
    for piece in body(0, length):
        digest.update(piece)
    return digest.hexdigest()


@dataclass
class Memory:
    """``VmRSS`` of a process sampled every 50 ms in a thread, in KiB."""

    pid: int
    samples: list[int] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            try:
                text = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    self.samples.append(int(line.split()[1]))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.samples)


@dataclass
class Storage:
    """One ``jetyard serve storage`` process on ``root``, against ``nats``."""

    root: Path
    nats: NatsServer
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "storage.log"

    def start(self) -> Storage:
        ready = self.root / "storage.ready"
        ready.unlink(missing_ok=True)
        env = {
            **os.environ,
            "JETYARD_NATS_URL": self.nats.url,
            "JETYARD_STORAGE_PORT": str(self.port),
            "JETYARD_STORAGE_HOSTNAME": HOSTNAME,
            "JETYARD_STORAGE_TOKEN_KEY": KEY,
            "JETYARD_STORAGE_VOLUMES": json.dumps(
                {"local": {"backend": "local", "root": str(self.root / "local")}}
            ),
            "JETYARD_STORAGE_USAGE_INTERVAL_S": "0.2",
            "JETYARD_READY_FILE": str(ready),
        }
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "jetyard.cli", "serve", "storage"],
                env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.05)
        assert httpx.get(f"{self.url}/healthz").status_code == 200
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def volume(self) -> LocalVolume:
        return LocalVolume("local", self.root / "local", HOSTNAME)


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(data_dir=tmp_path / "nats").start()
    yield server
    server.stop()


@pytest.fixture
def storage(tmp_path: Path, nats: NatsServer) -> Iterator[Storage]:
    started = Storage(tmp_path, nats).start()
    yield started
    started.stop()


def make_folder(nats: NatsServer) -> str:
    """A user and a folder of theirs, created through ``cmd.vfolder.create``."""

    async def make() -> str:
        bus = await connect(NatsSettings(url=nats.url), name="tests")
        try:
            await ensure_streams(bus)
            _, user = await person(EventStore(bus))
            actor = Actor(kind=ActorKind.USER, id=user)
            cmd = CreateVFolder(actor=actor, tenant=SYSTEM_TENANT, name="big")
            outcome = await CommandBus(bus).execute(cmd, 30)
            assert outcome is not None and outcome.accepted, outcome
            return cmd.folder_id
        finally:
            await bus.close()

    return asyncio.run(make())


def measured(nats: NatsServer, folder_id: str) -> list[tuple[int, int]]:
    """Every ``VFolderUsageMeasured`` of the folder in the log: (bytes, files)."""

    async def read() -> list[tuple[int, int]]:
        bus = await connect(NatsSettings(url=nats.url), name="tests")
        try:
            history = await EventStore(bus).read(AggregateRef(AggregateType.VFOLDER, folder_id))
        finally:
            await bus.close()
        return [
            (e.envelope.payload["bytes_used"], e.envelope.payload["files"])
            for e in history.events
            if e.envelope.name == "VFolderUsageMeasured"
        ]

    return asyncio.run(read())


def create_upload(storage: Storage, folder_id: str, path: str, length: int) -> str:
    grant = token("upload", folder_id, path)
    headers = {**TUS, **bearer(grant), "Upload-Length": str(length)}
    created = httpx.post(f"{storage.url}/folders/local/{folder_id}/uploads", headers=headers)
    assert created.status_code == 201, created.text
    return storage.url + created.headers["location"]


def send_rest(location: str, folder_id: str, path: str, length: int) -> int:
    """HEAD with a fresh token, then PATCH the rest (retrying while the server still holds
    the broken request's lock); the offset it resumed from."""
    deadline = time.monotonic() + 60
    with httpx.Client(timeout=600) as client:
        while True:
            grant = token("upload", folder_id, path)  # fresh: the first one was spent
            offset = offset_of(client, location, grant)
            headers = {
                **TUS, **bearer(grant), "Upload-Offset": str(offset), "Content-Type": OCTETS,
                "Content-Length": str(length - offset),
            }  # fmt: skip
            answer = client.patch(location, headers=headers, content=body(offset, length))
            if answer.status_code == 204:
                assert int(answer.headers["upload-offset"]) == length
                return offset
            assert answer.status_code in (409, 423), answer.text
            assert time.monotonic() < deadline, "the upload never became resumable"
            time.sleep(0.1)


def hang_up_after(location: str, path: str, folder_id: str, length: int, sent: int) -> None:
    """A PATCH announcing all ``length`` bytes whose client stops after ``sent``."""
    grant = token("upload", folder_id, path)
    where = urlsplit(location)
    head = (
        f"PATCH {where.path} HTTP/1.1\r\nHost: {where.netloc}\r\nTus-Resumable: 1.0.0\r\n"
        f"Authorization: Bearer {grant}\r\nUpload-Offset: 0\r\n"
        f"Content-Type: {OCTETS}\r\nContent-Length: {length}\r\n\r\n"
    )
    with socket.create_connection((where.hostname, where.port or 80)) as connection:
        connection.sendall(head.encode())
        for piece in body(0, sent):
            connection.sendall(piece)


def kill_once_written(storage: Storage, written: int) -> None:
    """SIGKILL the storage process once an upload's part file holds ``written`` bytes."""
    uploads = storage.root / "local" / ".jetyard" / "uploads"
    deadline = time.monotonic() + 60
    while not any(p.stat().st_size >= written for p in uploads.glob("*.part")):
        assert time.monotonic() < deadline, "the upload never got going"
        time.sleep(0.01)
    storage.kill()


def test_a_2_gib_upload_broken_half_way_resumes_in_flat_memory(
    storage: Storage, nats: NatsServer
) -> None:
    folder_id = make_folder(nats)
    length, path = 2 * GiB, "data/big.bin"
    assert storage.process is not None
    memory = Memory(storage.process.pid)
    time.sleep(0.5)
    at_rest = max(memory.samples)
    location = create_upload(storage, folder_id, path, length)
    hang_up_after(location, path, folder_id, length, GiB)
    resumed_from = send_rest(location, folder_id, path, length)
    peak = memory.stop()

    target = storage.volume().folder_root(folder_id) / path
    assert target.stat().st_size == length
    assert 0 < resumed_from <= GiB
    digest = hashlib.sha256()
    with open(target, "rb") as written:
        while piece := written.read(8 * MiB):
            digest.update(piece)
    assert digest.hexdigest() == sha256_of(length)
    print(f"storage RSS: {at_rest} KiB at rest, {peak} KiB at peak, resumed at {resumed_from}")
    assert peak < RSS_LIMIT_KIB, f"peak RSS {peak} KiB (at rest {at_rest} KiB)"


def test_a_storage_killed_mid_upload_resumes_and_the_log_agrees(
    storage: Storage, nats: NatsServer
) -> None:
    folder_id = make_folder(nats)
    length, path = 256 * MiB, "model.bin"
    location = create_upload(storage, folder_id, path, length)
    killer = threading.Thread(target=kill_once_written, args=(storage, 64 * MiB))
    killer.start()
    with contextlib.suppress(OSError):  # the server goes away under us: that is the point
        hang_up_after(location, path, folder_id, length, length - MiB)
    killer.join()
    assert storage.process is not None and storage.process.returncode == -signal.SIGKILL
    storage.start()

    resumed_from = send_rest(location, folder_id, path, length)
    assert resumed_from < length
    target = storage.volume().folder_root(folder_id) / path
    assert target.stat().st_size == length

    usage = storage.volume().usage(folder_id)
    deadline = time.monotonic() + 30
    while (measured(nats, folder_id) or [(-1, -1)])[-1] != (usage.bytes, usage.files):
        assert time.monotonic() < deadline, (measured(nats, folder_id), usage)
        time.sleep(0.2)
    assert (usage.bytes, usage.files) == (length, 1)
