"""The storage data plane under a real uvicorn: quotas and sizes checked before and during an
upload, and flat memory through a 256 MiB upload and download."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schemas.ids import new_id
from tests.integration.storage_dataplane.support import MiB, listing, refused, upload
from tests.integration.storage_support import (
    StorageServer,
    create_upload,
    folder_url,
    offset_of,
    patch,
    running,
    token,
    wait_until,
)

# -- quotas and sizes -----------------------------------------------------------------


def test_an_upload_over_the_token_size_is_refused_at_creation(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    grant = token("upload", folder, "x.bin", max_bytes=1000)
    refused(create_upload(client, folder_url(server, folder), grant, 1001), 413, "too_large")
    assert create_upload(client, folder_url(server, folder), grant, 1000).status_code == 201


def test_quota_is_checked_before_an_upload(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    server.local().set_quota(folder, 100_000)
    (server.local().folder_root(folder) / "old.bin").write_bytes(b"x" * 60_000)
    grant = token("upload", folder, "new.bin")
    message = refused(
        create_upload(client, folder_url(server, folder), grant, 50_000), 413, "quota_exceeded"
    )
    assert "100000" in message and "60000" in message
    upload(client, server, folder, "fits.bin", b"y" * 40_000)


def test_quota_exceeded_between_patches_stops_the_upload_and_shows_nothing(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    server.local().set_quota(folder, 1_000_000)
    grant = token("upload", folder, "data.bin")
    created = create_upload(client, folder_url(server, folder), grant, 800_000)
    location = server.url + created.headers["location"]
    assert patch(client, location, grant, 0, b"a" * 400_000).status_code == 204
    # A session fills the folder through its mount meanwhile.
    (server.local().folder_root(folder) / "session.bin").write_bytes(b"s" * 500_000)
    refused(patch(client, location, grant, 400_000, b"a" * 400_000), 413, "quota_exceeded")
    assert listing(client, server, folder) == ["session.bin"]


def test_quota_exceeded_mid_stream_stops_the_upload_and_shows_nothing(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    server.local().set_quota(folder, 1_000_000)
    root = server.local().folder_root(folder)
    grant = token("upload", folder, "data.bin")
    created = create_upload(client, folder_url(server, folder), grant, 900_000)
    location = server.url + created.headers["location"]

    part = server.local().upload_area(folder) / f"{location.rsplit('/', 1)[1]}.part"

    def body() -> Iterator[bytes]:
        yield b"a" * 100_000
        # Once the server writes (past its check at the start), a session fills the folder;
        # the server's next check (every 64 KiB received) sees it.
        wait_until(lambda: part.stat().st_size > 0)
        (root / "session.bin").write_bytes(b"s" * 200_000)
        for _ in range(8):
            yield b"a" * 100_000

    answer = patch(client, location, grant, 0, body(), length=900_000)
    assert "900000" in refused(answer, 413, "quota_exceeded")
    assert 0 < offset_of(client, location, grant) < 900_000
    assert listing(client, server, folder) == ["session.bin"]


# -- memory ---------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_memory_stays_flat_through_a_256_mib_upload_and_download(
    client: httpx.Client, tmp_path: Path
) -> None:
    size, block = 256 * MiB, os.urandom(MiB)
    folder = f"f-{new_id()[:12]}"
    with running(tmp_path) as fresh:
        fresh.local().create_folder(folder)
        upload(client, fresh, folder, "warm.bin", block)  # code paths loaded before measuring
        client.get(
            f"{folder_url(fresh, folder)}/download",
            params={"path": "warm.bin", "token": token("download", folder, "warm.bin")},
        )
        baseline = fresh.memory_kib("VmRSS")
        grant = token("upload", folder, "big.bin")
        created = create_upload(client, folder_url(fresh, folder), grant, size)
        location = fresh.url + created.headers["location"]
        sent = hashlib.sha256()

        def body() -> Iterator[bytes]:
            for n in range(size // MiB):
                chunk = n.to_bytes(8, "big") + block[8:]
                sent.update(chunk)
                yield chunk

        started = time.monotonic()
        assert patch(client, location, grant, 0, body(), length=size).status_code == 204
        received = hashlib.sha256()
        with client.stream(
            "GET",
            f"{folder_url(fresh, folder)}/download",
            params={"path": "big.bin", "token": token("download", folder, "big.bin")},
        ) as answer:
            assert answer.status_code == 200
            for chunk in answer.iter_bytes():
                received.update(chunk)
        elapsed = time.monotonic() - started
        growth_mib = (fresh.memory_kib("VmHWM") - baseline) / 1024
    assert received.digest() == sent.digest()
    print(f"server memory growth {growth_mib:.1f} MiB, 256 MiB up and down in {elapsed:.1f} s")
    assert growth_mib < 50, f"server memory grew {growth_mib:.1f} MiB (in {elapsed:.1f} s)"
