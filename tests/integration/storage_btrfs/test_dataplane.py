"""The data plane serving a btrfs volume (a real uvicorn process): uploads land by a clone,
and the kernel's limit refuses what a session or the upload itself would put past it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schemas.ids import new_id
from tests.integration.storage_btrfs.support import BtrfsServer, MiB, fill
from tests.integration.storage_dataplane.support import listing, refused, upload
from tests.integration.storage_support import (
    create_upload,
    folder_url,
    offset_of,
    patch,
    token,
    wait_until,
)


@pytest.fixture(scope="module")
def server(mount: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BtrfsServer]:
    volume_root = mount / f"served-{new_id()[:8]}"
    volume_root.mkdir()
    started = BtrfsServer(tmp_path_factory.mktemp("btrfs-plane"), volume_root)
    try:
        started.start()
        yield started
    finally:
        started.stop()
        shutil.rmtree(volume_root)


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as opened:
        yield opened


@pytest.fixture
def served(server: BtrfsServer) -> Iterator[str]:
    """A fresh folder on the served volume, removed afterwards."""
    folder_id = f"f-{new_id()[:12]}"
    server.btrfs().create_folder(folder_id)
    yield folder_id
    server.btrfs().remove_folder(folder_id)


def test_an_upload_lands_in_place(client: httpx.Client, server: BtrfsServer, served: str) -> None:
    volume = server.btrfs()
    volume.set_quota(served, 16 * MiB)
    data = os.urandom(3 * MiB)
    upload(client, server, served, "in/data.bin", data)
    assert (volume.folder_root(served) / "in" / "data.bin").read_bytes() == data
    assert listing(client, server, served, "in") == ["data.bin"]
    area = volume.upload_area(served)
    assert not [name for name in os.listdir(area) if name.endswith(".part")]
    assert 3 * MiB <= volume.quota_used(served) < 4 * MiB  # counted once, not part and file
    assert 3 * MiB <= volume.usage(served).bytes < 4 * MiB


def test_a_folder_a_session_filled_refuses_an_upload(
    client: httpx.Client, server: BtrfsServer, served: str
) -> None:
    volume = server.btrfs()
    volume.set_quota(served, 8 * MiB)
    fill(volume.folder_root(served) / "session.bin", 16 * MiB)  # stopped by the kernel
    grant = token("upload", served, "new.bin")
    # Refused by the data plane's check, or by the kernel when the upload's first file is
    # made in the full folder's upload area: 413 either way.
    refused(create_upload(client, folder_url(server, served), grant, MiB), 413, "quota_exceeded")
    assert listing(client, server, served) == ["session.bin"]


def test_an_upload_passing_the_limit_mid_body_is_refused_by_the_kernel(
    client: httpx.Client, server: BtrfsServer, served: str
) -> None:
    """The data plane's checks pass (at creation and at the PATCH's start; its recheck comes
    only every 256 MiB); a session then takes most of the room, and the kernel refuses the
    upload's next write: ``EDQUOT``, answered 413."""
    volume = server.btrfs()
    quota = 10 * MiB
    volume.set_quota(served, quota)
    grant = token("upload", served, "data.bin")
    created = create_upload(client, folder_url(server, served), grant, 8 * MiB)
    assert created.status_code == 201, created.text
    location = server.url + created.headers["location"]
    part = volume.upload_area(served) / f"{location.rsplit('/', 1)[1]}.part"

    def body() -> Iterator[bytes]:
        yield os.urandom(MiB)
        wait_until(lambda: part.stat().st_size > 0)
        fill(volume.folder_root(served) / "session.bin", 5 * MiB)
        for _ in range(7):
            yield os.urandom(MiB)

    answer = patch(client, location, grant, 0, body(), length=8 * MiB)
    assert "used up" in refused(answer, 413, "quota_exceeded")  # EDQUOT, from the kernel
    assert 0 < offset_of(client, location, grant) < 8 * MiB
    assert listing(client, server, served) == ["session.bin"]
    assert volume.quota_used(served) <= quota


def test_two_uploads_that_together_pass_the_quota_one_is_refused_at_its_start(
    client: httpx.Client, server: BtrfsServer, served: str
) -> None:
    """The first upload's bytes count against the quota as they arrive (its part lies in the
    folder's qgroup); what it has not sent yet is reserved, so the second is refused when it
    is created, not half-way, and the first still completes."""
    volume = server.btrfs()
    volume.set_quota(served, 10 * MiB)
    first_grant = token("upload", served, "first.bin")
    first = create_upload(client, folder_url(server, served), first_grant, 6 * MiB)
    assert first.status_code == 201, first.text
    location = server.url + first.headers["location"]
    data = os.urandom(6 * MiB)
    assert patch(client, location, first_grant, 0, data[: 2 * MiB]).status_code == 204

    second = token("upload", served, "second.bin")
    message = refused(
        create_upload(client, folder_url(server, served), second, 6 * MiB), 413, "quota_exceeded"
    )
    assert f"{4 * MiB} are reserved by uploads in progress" in message

    assert patch(client, location, first_grant, 2 * MiB, data[2 * MiB :]).status_code == 204
    assert (volume.folder_root(served) / "first.bin").read_bytes() == data
    assert listing(client, server, served) == ["first.bin"]
    assert volume.quota_used(served) <= 10 * MiB
