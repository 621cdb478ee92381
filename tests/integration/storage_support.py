"""The storage data plane as a real server for tests: a uvicorn subprocess started through
``services.storage.dataplane.run`` with ``JETYARD_STORAGE_*`` settings (so it can be killed,
restarted on the same volumes and weighed), tokens, and a small tus client."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from events.domain.tenancy import DomainCreated, ResourcePolicyCreated, UserCreated
from events.store import EventStore
from jetyard.runtime.natsserver import free_port
from schemas.ids import new_id
from schemas.subjects import AggregateType
from schemas.tenancy import (
    PolicyKind,
    Role,
    StoragePolicyLimits,
    email_digest,
    policy_id_for,
    user_id_for,
)
from services.storage.tokens import Claims, Operation, issue
from services.storage.volumes import LocalVolume, SharedVolume
from tests.tenancy_support import DIGEST_KEY, record

KEY = "storage-test-key-" + "k" * 32
HOSTNAME = "storage-test-host"
TUS = {"Tus-Resumable": "1.0.0"}
OCTETS = "application/offset+octet-stream"
_RUN = (
    "from services.storage.dataplane import run; "
    "from services.storage.settings import StorageSettings; run(StorageSettings())"
)


class StorageServer:
    """One data-plane process serving a ``local`` and a ``shared`` volume under ``root``."""

    def __init__(self, root: Path, **settings: Any) -> None:
        self.root = root
        self.settings = settings
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = root / f"storage-{new_id()[:8]}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def volumes(self) -> dict[str, Any]:
        return {
            "local": {"backend": "local", "root": str(self.root / "local")},
            "shared": {"backend": "shared", "mounts": {"*": str(self.root / "shared")}},
        }

    def start(self) -> StorageServer:
        self.port = free_port()
        env = {
            **os.environ,
            "JETYARD_STORAGE_HOST": "127.0.0.1",
            "JETYARD_STORAGE_PORT": str(self.port),
            "JETYARD_STORAGE_HOSTNAME": HOSTNAME,
            "JETYARD_STORAGE_TOKEN_KEY": KEY,
            "JETYARD_STORAGE_VOLUMES": json.dumps(self.volumes()),
            **{f"JETYARD_STORAGE_{k.upper()}": str(v) for k, v in self.settings.items()},
        }
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _RUN], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"storage server exited: {self.log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"storage server did not answer: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crash."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def memory_kib(self, field: str) -> int:
        """``VmRSS`` or ``VmHWM`` (its high-water mark) of the server process, in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        raise LookupError(field)

    def local(self) -> LocalVolume:
        """The ``local`` volume, as this test process sees the same directory."""
        return LocalVolume("local", self.root / "local", HOSTNAME)

    def shared(self) -> SharedVolume:
        return SharedVolume("shared", {"*": self.root / "shared"}, HOSTNAME)


@contextlib.contextmanager
def running(root: Path, **settings: Any) -> Iterator[StorageServer]:
    server = StorageServer(root, **settings).start()
    try:
        yield server
    finally:
        server.stop()


def token(
    op: str | Operation,
    folder: str,
    path: str = "",
    *,
    prefix: bool = False,
    volume: str = "local",
    ttl_s: float = 300,
    **claims: Any,
) -> str:
    return issue(
        KEY.encode(),
        Claims(
            op=Operation(op),
            volume=volume,
            folder=folder,
            path=path,
            prefix=prefix,
            exp=int(time.time() + ttl_s),
            **claims,
        ),
    )


def bearer(text: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {text}"}


def folder_url(server: StorageServer, folder: str, volume: str = "local") -> str:
    return f"{server.url}/folders/{volume}/{folder}"


def create_upload(
    client: httpx.Client,
    base: str,
    grant: str,
    length: int,
    path: str | None = None,
) -> httpx.Response:
    headers = {**TUS, **bearer(grant), "Upload-Length": str(length)}
    if path is not None:
        headers["Upload-Metadata"] = "path " + base64.b64encode(path.encode()).decode()
    return client.post(f"{base}/uploads", headers=headers)


def patch(
    client: httpx.Client,
    location: str,
    grant: str,
    offset: int,
    body: bytes | Iterable[bytes],
    length: int | None = None,
) -> httpx.Response:
    size = len(body) if isinstance(body, bytes) else length
    headers = {**TUS, **bearer(grant), "Upload-Offset": str(offset), "Content-Type": OCTETS}
    if size is not None:
        headers["Content-Length"] = str(size)
    return client.patch(location, headers=headers, content=body)


def offset_of(client: httpx.Client, location: str, grant: str) -> int:
    answer = client.head(location, headers={**TUS, **bearer(grant)})
    assert answer.status_code == 200, answer.headers
    return int(answer.headers["upload-offset"])


def send_part_and_hang_up(location: str, grant: str, offset: int, body: bytes, sent: int) -> None:
    """A PATCH announcing all of ``body`` whose connection closes after ``sent`` bytes."""
    where = urlsplit(location)
    head = (
        f"PATCH {where.path} HTTP/1.1\r\nHost: {where.netloc}\r\nTus-Resumable: 1.0.0\r\n"
        f"Authorization: Bearer {grant}\r\nUpload-Offset: {offset}\r\n"
        f"Content-Type: {OCTETS}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with socket.create_connection((where.hostname, where.port or 80)) as connection:
        connection.sendall(head.encode() + body[:sent])


def resume(
    client: httpx.Client, location: str, grant: str, data: bytes, timeout_s: float = 30.0
) -> int:
    """HEAD then PATCH the rest until it is accepted (the server may still be finishing the
    broken request: 423 busy or 409 moved on); the offset it resumed from."""
    deadline = time.monotonic() + timeout_s
    while True:
        offset = offset_of(client, location, grant)
        answer = patch(client, location, grant, offset, data[offset:])
        if answer.status_code == 204:
            assert int(answer.headers["upload-offset"]) == len(data)
            return offset
        assert answer.status_code in (409, 423), answer.text
        assert time.monotonic() < deadline, "the upload never became resumable"
        time.sleep(0.05)


def wait_until(check: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


# ---- the storage service (control part) on the shared nats-server --------------------------


async def person(
    store: EventStore,
    *,
    max_folders: int | None = None,
    max_total_bytes: int | None = None,
    domain: str | None = None,
) -> tuple[str, str]:
    """A user of a fresh domain (or ``domain``) with a user policy of their own carrying these
    storage limits: (domain, user id)."""
    suffix = new_id()[:8]
    if domain is None:
        domain = f"dom-{suffix}"
        await record(store, AggregateType.DOMAIN, domain, DomainCreated())
    policy = f"up-{suffix}"
    limits = StoragePolicyLimits(
        max_vfolder_count=max_folders, max_quota_scope_size_bytes=max_total_bytes
    )
    await record(
        store,
        AggregateType.RESOURCE_POLICY,
        policy_id_for(PolicyKind.USER, policy),
        ResourcePolicyCreated(kind=PolicyKind.USER, name=policy, storage=limits),
    )
    digest = email_digest(f"folder-{suffix}@example.org", DIGEST_KEY)
    user_id = user_id_for(digest)
    created = UserCreated(
        domain=domain, role=Role.USER, email_digest=digest, email_sealed="x", policy=policy
    )
    await record(store, AggregateType.USER, user_id, created)
    return domain, user_id
