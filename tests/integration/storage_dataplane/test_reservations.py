"""Uploads reserve their declared size against the folder's quota until they finish, expire or
are abandoned: uploads side by side cannot together pass the quota (a real uvicorn, real
files, concurrent clients)."""

from __future__ import annotations

import concurrent.futures
import time
from pathlib import Path

import httpx

from schemas.ids import new_id
from tests.integration.storage_dataplane.support import listing, refused, upload
from tests.integration.storage_support import (
    TUS,
    StorageServer,
    bearer,
    create_upload,
    folder_url,
    patch,
    running,
    token,
)


def test_two_uploads_that_together_pass_the_quota_one_is_refused_at_its_start(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    server.local().set_quota(folder, 1000)
    first_grant, second_grant = token("upload", folder, "a.bin"), token("upload", folder, "b.bin")
    first = create_upload(client, folder_url(server, folder), first_grant, 600)
    assert first.status_code == 201, first.text
    message = refused(
        create_upload(client, folder_url(server, folder), second_grant, 600), 413, "quota_exceeded"
    )
    assert "1000 bytes" in message and "600 are reserved by uploads in progress" in message

    # The first, resumed over two PATCHes, is not held back by its own reservation.
    location = server.url + first.headers["location"]
    assert patch(client, location, first_grant, 0, b"a" * 300).status_code == 204
    assert patch(client, location, first_grant, 300, b"a" * 300).status_code == 204
    # What is left after it fits; one byte more does not.
    refused(
        create_upload(client, folder_url(server, folder), second_grant, 401), 413, "quota_exceeded"
    )
    upload(client, server, folder, "b.bin", b"b" * 400)
    assert listing(client, server, folder) == ["a.bin", "b.bin"]
    assert server.local().usage(folder).bytes == 1000


def test_concurrent_creations_are_decided_one_after_the_other(
    server: StorageServer, folder: str
) -> None:
    server.local().set_quota(folder, 1000)

    def create(index: int) -> int:
        with httpx.Client(timeout=30) as own:
            grant = token("upload", folder, f"part-{index}.bin")
            return create_upload(own, folder_url(server, folder), grant, 300).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        codes = sorted(pool.map(create, range(8)))
    assert codes == [201] * 3 + [413] * 5


def test_an_abandoned_upload_holds_its_reservation_until_it_expires(
    client: httpx.Client, tmp_path: Path
) -> None:
    folder = f"f-{new_id()[:12]}"
    # The sweep is slow on purpose: an expired upload stops holding before it is swept.
    with running(tmp_path, upload_ttl_s=1, sweep_interval_s=60) as short:
        short.local().create_folder(folder)
        short.local().set_quota(folder, 1000)
        grant = token("upload", folder, "slow.bin")
        held = create_upload(client, folder_url(short, folder), grant, 900)
        assert held.status_code == 201, held.text
        later = token("upload", folder, "later.bin")
        refused(create_upload(client, folder_url(short, folder), later, 500), 413, "quota_exceeded")
        time.sleep(1.2)
        assert create_upload(client, folder_url(short, folder), later, 500).status_code == 201


def test_terminating_an_upload_releases_its_reservation(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    server.local().set_quota(folder, 1000)
    grant = token("upload", folder, "gone.bin")
    created = create_upload(client, folder_url(server, folder), grant, 800)
    other = token("upload", folder, "other.bin")
    refused(create_upload(client, folder_url(server, folder), other, 800), 413, "quota_exceeded")
    location = server.url + created.headers["location"]
    assert client.delete(location, headers={**TUS, **bearer(grant)}).status_code == 204
    assert create_upload(client, folder_url(server, folder), other, 800).status_code == 201


def test_a_folder_without_a_quota_takes_any_number_of_uploads(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    for index in range(3):
        grant = token("upload", folder, f"big-{index}.bin")
        assert create_upload(client, folder_url(server, folder), grant, 10**12).status_code == 201
