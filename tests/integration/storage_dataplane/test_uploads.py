"""The storage data plane under a real uvicorn, on real files: resumable uploads (a broken
connection, a killed server), termination, prefix tokens, expiry, usage on a shared volume."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import httpx

from schemas.ids import new_id
from services.storage.foldertree import Usage
from tests.integration.storage_dataplane.support import MiB, listing, refused, upload
from tests.integration.storage_support import (
    TUS,
    StorageServer,
    bearer,
    create_upload,
    folder_url,
    offset_of,
    patch,
    resume,
    running,
    send_part_and_hang_up,
    token,
    wait_until,
)

# -- uploads --------------------------------------------------------------------------


def test_an_upload_broken_mid_patch_resumes_from_the_offset_the_server_kept(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    data = os.urandom(8 * MiB)
    grant = token("upload", folder, "big/data.bin")
    created = create_upload(client, folder_url(server, folder), grant, len(data))
    assert created.status_code == 201
    location = server.url + created.headers["location"]
    assert offset_of(client, location, grant) == 0
    send_part_and_hang_up(location, grant, 0, data, sent=len(data) // 2)
    assert listing(client, server, folder) == []  # nothing visible until complete
    resumed_from = resume(client, location, grant, data)
    assert 0 < resumed_from <= len(data) // 2
    root = server.local().folder_root(folder)
    assert hashlib.sha256((root / "big/data.bin").read_bytes()).digest() == (
        hashlib.sha256(data).digest()
    )
    assert offset_of(client, location, grant) == len(data)  # HEAD after completion
    again = patch(client, location, grant, len(data), b"")  # the last PATCH, repeated
    assert again.status_code == 204


def test_an_upload_survives_the_server_killed_mid_patch_and_restarted(
    client: httpx.Client, tmp_path: Path
) -> None:
    data = os.urandom(6 * MiB)
    folder = f"f-{new_id()[:12]}"
    first = StorageServer(tmp_path).start()
    try:
        first.local().create_folder(folder)
        grant = token("upload", folder, "result.bin")
        created = create_upload(client, folder_url(first, folder), grant, len(data))
        path = created.headers["location"]
        part = first.local().upload_area(folder) / f"{path.rsplit('/', 1)[1]}.part"
        send_part_and_hang_up(first.url + path, grant, 0, data, sent=len(data) // 2)
        wait_until(lambda: part.stat().st_size > 0)
        first.kill()
    finally:
        first.stop()
    with running(tmp_path) as second:  # the same volumes, a new process and port
        location = second.url + path
        kept = offset_of(client, location, grant)
        assert 0 < kept <= len(data) // 2
        assert resume(client, location, grant, data) == kept
        assert (second.local().folder_root(folder) / "result.bin").read_bytes() == data


def test_a_completed_upload_lands_in_place_and_replaces_a_file(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    upload(client, server, folder, "a/b/c.txt", b"first version")
    upload(client, server, folder, "a/b/c.txt", b"second")
    upload(client, server, folder, "a/empty", b"")
    root = server.local().folder_root(folder)
    assert (root / "a/b/c.txt").read_bytes() == b"second"
    assert (root / "a/empty").read_bytes() == b""
    assert listing(client, server, folder, "a") == ["b", "empty"]


def test_tus_discovery_and_protocol_errors(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    base = folder_url(server, folder)
    found = client.options(f"{base}/uploads")
    assert found.status_code == 204
    assert found.headers["tus-version"] == "1.0.0"
    assert "creation" in found.headers["tus-extension"]
    grant = token("upload", folder, "x.bin")
    old = client.post(f"{base}/uploads", headers={**bearer(grant), "Tus-Resumable": "0.2.2"})
    refused(old, 412, "tus_version")
    assert old.headers["tus-version"] == "1.0.0"
    no_length = client.post(f"{base}/uploads", headers={**TUS, **bearer(grant)})
    refused(no_length, 400, "bad_header")
    created = create_upload(client, base, grant, 10)
    location = server.url + created.headers["location"]
    assert created.headers["tus-resumable"] == "1.0.0"
    assert "upload-expires" in created.headers
    wrong_offset = patch(client, location, grant, 5, b"12345")
    refused(wrong_offset, 409, "offset_mismatch")
    assert wrong_offset.headers["upload-offset"] == "0"
    plain = client.patch(
        location,
        headers={**TUS, **bearer(grant), "Upload-Offset": "0", "Content-Type": "text/plain"},
        content=b"x",
    )
    refused(plain, 415, "bad_content_type")
    refused(patch(client, location, grant, 0, b"x" * 11), 413, "too_long")
    refused(patch(client, location, grant, 0, iter([b"x" * 6, b"x" * 6])), 413, "too_long")
    unknown = f"{base}/uploads/{'0' * 32}"
    refused(patch(client, unknown, grant, 0, b"x"), 404, "upload_not_found")
    assert (
        client.head(f"{base}/uploads/nonsense", headers={**TUS, **bearer(grant)}).status_code == 404
    )


def test_termination_forgets_an_upload(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    grant = token("upload", folder, "gone.bin")
    created = create_upload(client, folder_url(server, folder), grant, 100)
    location = server.url + created.headers["location"]
    assert patch(client, location, grant, 0, b"x" * 50).status_code == 204
    upload_id = location.rsplit("/", 1)[1]
    assert (server.local().upload_area(folder) / f"{upload_id}.part").exists()
    assert client.delete(location, headers={**TUS, **bearer(grant)}).status_code == 204
    assert not (server.local().upload_area(folder) / f"{upload_id}.part").exists()
    assert client.head(location, headers={**TUS, **bearer(grant)}).status_code == 404


def test_a_prefix_token_uploads_by_filename_beneath_its_directory(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    grant = token("upload", folder, "inbox", prefix=True)
    headers = {**TUS, **bearer(grant), "Upload-Length": "3", "Upload-Metadata": "filename YS50"}
    created = client.post(f"{folder_url(server, folder)}/uploads", headers=headers)
    assert created.status_code == 201, created.text
    assert (
        patch(client, server.url + created.headers["location"], grant, 0, b"abc").status_code == 204
    )
    assert (server.local().folder_root(folder) / "inbox" / "a.t").read_bytes() == b"abc"


def test_expired_uploads_are_swept(client: httpx.Client, tmp_path: Path) -> None:
    folder = f"f-{new_id()[:12]}"
    with running(tmp_path, upload_ttl_s=1, sweep_interval_s=0.2) as short:
        short.local().create_folder(folder)
        grant = token("upload", folder, "slow.bin")
        created = create_upload(client, folder_url(short, folder), grant, 100)
        location = short.url + created.headers["location"]
        assert created.status_code == 201
        area = short.local().upload_area(folder)
        upload_id = location.rsplit("/", 1)[1]
        wait_until(lambda: not [name for name in os.listdir(area) if upload_id in name])
        refused(patch(client, location, grant, 0, b"y"), 404, "upload_not_found")


def test_the_shared_volume_keeps_usage_as_uploads_and_deletes_happen(
    client: httpx.Client, server: StorageServer
) -> None:
    folder = f"f-{new_id()[:12]}"
    volume = server.shared()
    volume.create_folder(folder)
    try:
        assert volume.usage(folder) == Usage(0, 0)
        base = folder_url(server, folder, "shared")
        for name, size in [("a.bin", 1000), ("b.bin", 500)]:
            grant = token("upload", folder, name, volume="shared")
            created = create_upload(client, base, grant, size)
            done = patch(client, server.url + created.headers["location"], grant, 0, b"x" * size)
            assert done.status_code == 204
        assert volume.usage(folder) == Usage(1500, 2)
        gone = client.post(
            f"{base}/delete",
            json={"path": "a.bin"},
            headers=bearer(token("delete", folder, "a.bin", volume="shared")),
        )
        assert gone.status_code == 200
        assert volume.usage(folder) == Usage(500, 1)
    finally:
        volume.remove_folder(folder)
