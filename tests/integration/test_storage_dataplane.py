"""The storage data plane under a real uvicorn, on real files: resumable uploads (a broken
connection, a killed server), ranged downloads, archives, the directory operations, every
escape attempt of issue 13 item 5, token misuse, quotas, and flat memory."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from schemas.ids import new_id
from services.storage.foldertree import Usage
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

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageServer]:
    # Small writes and quota checks, so a test can see a PATCH half-way through.
    root = tmp_path_factory.mktemp("storage")
    with running(root, chunk_bytes=64 * 1024, quota_recheck_bytes=64 * 1024) as started:
        yield started


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as opened:
        yield opened


@pytest.fixture
def folder(server: StorageServer) -> Iterator[str]:
    """A fresh folder on the local volume, removed afterwards."""
    folder_id = f"f-{new_id()[:12]}"
    server.local().create_folder(folder_id)
    yield folder_id
    server.local().remove_folder(folder_id)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside every folder, with a secret no request may reach or change."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret")
    return tmp_path / "outside"


def upload(
    client: httpx.Client, server: StorageServer, folder: str, path: str, data: bytes
) -> None:
    grant = token("upload", folder, path)
    created = create_upload(client, folder_url(server, folder), grant, len(data))
    assert created.status_code == 201, created.text
    if data:
        done = patch(client, server.url + created.headers["location"], grant, 0, data)
        assert done.status_code == 204, done.text


def listing(client: httpx.Client, server: StorageServer, folder: str, path: str = "") -> list[str]:
    answer = client.get(
        f"{folder_url(server, folder)}/list",
        params={"path": path, "token": token("list", folder, path)},
    )
    assert answer.status_code == 200, answer.text
    return sorted(entry["name"] for entry in answer.json()["entries"])


def refused(answer: httpx.Response, status: int, code: str) -> str:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["error"] == code, body
    message: str = body["message"]
    assert message
    return message


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
        part = first.local().upload_area() / f"{path.rsplit('/', 1)[1]}.part"
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
    assert (server.local().upload_area() / f"{upload_id}.part").exists()
    assert client.delete(location, headers={**TUS, **bearer(grant)}).status_code == 204
    assert not (server.local().upload_area() / f"{upload_id}.part").exists()
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
        area = short.local().upload_area()
        wait_until(lambda: os.listdir(area) == [])
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


# -- downloads, archives, directories -------------------------------------------------


def test_downloads_honour_single_ranges(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    data = os.urandom(3 * MiB + 17)
    (server.local().folder_root(folder) / "f.bin").write_bytes(data)
    url = f"{folder_url(server, folder)}/download"
    grant = bearer(token("download", folder, "f.bin"))
    whole = client.get(url, headers=grant)
    assert whole.status_code == 200
    assert whole.content == data
    assert whole.headers["content-length"] == str(len(data))
    assert whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["content-type"] == "application/octet-stream"
    assert whole.headers["x-content-type-options"] == "nosniff"
    for header, start, end in [
        ("bytes=0-99", 0, 99),
        ("bytes=1048570-2097160", 1048570, 2097160),
        (f"bytes={len(data) - 10}-", len(data) - 10, len(data) - 1),
        ("bytes=-5", len(data) - 5, len(data) - 1),
    ]:
        part = client.get(url, headers={**grant, "Range": header})
        assert part.status_code == 206, header
        assert part.content == data[start : end + 1]
        assert part.headers["content-range"] == f"bytes {start}-{end}/{len(data)}"
        assert part.headers["content-length"] == str(end - start + 1)
    past = client.get(url, headers={**grant, "Range": f"bytes={len(data)}-"})
    refused(past, 416, "range_not_satisfiable")
    assert past.headers["content-range"] == f"bytes */{len(data)}"
    stale = client.get(url, headers={**grant, "Range": "bytes=0-9", "If-Range": '"old"'})
    assert stale.status_code == 200 and len(stale.content) == len(data)
    fresh = client.get(
        url, headers={**grant, "Range": "bytes=0-9", "If-Range": whole.headers["etag"]}
    )
    assert fresh.status_code == 206
    head = client.head(url, headers=grant)
    assert head.status_code == 200 and head.headers["content-length"] == str(len(data))
    by_query = client.get(url, params={"token": token("download", folder, "f.bin")})
    assert by_query.content == data


def test_a_directory_downloads_as_a_streamed_tar(
    client: httpx.Client, server: StorageServer, folder: str, outside: Path
) -> None:
    root = server.local().folder_root(folder)
    (root / "results" / "epoch-1").mkdir(parents=True)
    (root / "results" / "epoch-1" / "model.bin").write_bytes(os.urandom(2 * MiB))
    (root / "results" / "log.txt").write_text("done")
    (root / "results" / "leak").symlink_to(outside / "secret.txt")
    (root / "results" / "out").symlink_to(outside)
    answer = client.get(
        f"{folder_url(server, folder)}/archive",
        params={"path": "results", "token": token("archive", folder, "results")},
    )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/x-tar"
    assert "content-length" not in answer.headers  # streamed
    with tarfile.open(fileobj=io.BytesIO(answer.content)) as archive:
        assert sorted(archive.getnames()) == [
            "results",
            "results/epoch-1",
            "results/epoch-1/model.bin",
            "results/log.txt",
        ]
        model = archive.extractfile("results/epoch-1/model.bin")
        assert model is not None
        assert model.read() == (root / "results" / "epoch-1" / "model.bin").read_bytes()


def test_list_mkdir_move_and_delete(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    base = folder_url(server, folder)
    made = client.post(
        f"{base}/mkdir",
        json={"path": "x/y/z", "parents": True},
        headers=bearer(token("mkdir", folder, "x", prefix=True)),
    )
    assert made.status_code == 201
    again = client.post(
        f"{base}/mkdir", json={"path": "x/y/z"}, headers=bearer(token("mkdir", folder, "x/y/z"))
    )
    refused(again, 409, "exists")
    upload(client, server, folder, "x/y/z/f.txt", b"hello")
    page = client.get(
        f"{base}/list", params={"path": "x/y/z", "token": token("list", folder, "x/y/z")}
    )
    (entry,) = page.json()["entries"]
    assert entry["name"] == "f.txt" and entry["type"] == "file" and entry["size"] == 5
    assert entry["mtime"].endswith("+00:00") and entry["safe"] is True
    moved = client.post(
        f"{base}/move",
        json={"from": "x/y/z/f.txt", "to": "x/g.txt"},
        headers=bearer(token("move", folder, "x", prefix=True)),
    )
    assert moved.status_code == 200, moved.text
    assert listing(client, server, folder, "x") == ["g.txt", "y"]
    delete = bearer(token("delete", folder, "x", prefix=True))
    refused(client.post(f"{base}/delete", json={"path": "x"}, headers=delete), 409, "not_empty")
    assert (
        client.post(
            f"{base}/delete", json={"path": "x", "recursive": True}, headers=delete
        ).status_code
        == 200
    )
    assert listing(client, server, folder) == []


def test_listing_pages_through_a_directory(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    root = server.local().folder_root(folder)
    for n in range(25):
        (root / f"file-{n:02d}").write_text(str(n))
    seen: list[str] = []
    after = ""
    while True:
        page = client.get(
            f"{folder_url(server, folder)}/list",
            params={"after": after, "limit": "10", "token": token("list", folder)},
        ).json()
        seen += [entry["name"] for entry in page["entries"]]
        if not page["more"]:
            break
        after = page["next_after"]
    assert seen == [f"file-{n:02d}" for n in range(25)]


# -- escape attempts (issue 13, item 5) ------------------------------------------------

ESCAPES = [
    "..",
    "../secret.txt",
    "a/../../secret.txt",
    "/etc/passwd",
    "\uff0e\uff0e/\uff0e\uff0e/etc/passwd",
    "a\u2215b",
    "a\u2044b",
    "a\uff0fb",
    "..\\..\\etc\\passwd",
    "a\x00b",
    "evil\u202etxt.exe",
    "a//b",
    "./a",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_escaping_paths_are_refused_by_every_operation(
    client: httpx.Client, server: StorageServer, folder: str, path: str
) -> None:
    base = folder_url(server, folder)
    everything = {op: token(op, folder, prefix=True) for op in ("download", "list", "archive")}
    for op, grant in everything.items():
        answer = client.get(f"{base}/{op}", params={"path": path, "token": grant})
        refused(answer, 400, "unsafe_path")
    for op, body in [
        ("mkdir", {"path": path, "parents": True}),
        ("delete", {"path": path, "recursive": True}),
        ("move", {"from": path, "to": "x"}),
        ("move", {"from": "x", "to": path}),
    ]:
        answer = client.post(
            f"{base}/{op}", json=body, headers=bearer(token(op, folder, prefix=True))
        )
        refused(answer, 400, "unsafe_path")
    grant = token("upload", folder, prefix=True)
    refused(create_upload(client, base, grant, 1, path=path), 400, "unsafe_path")
    assert listing(client, server, folder) == []


def test_a_symlink_planted_inside_the_folder_is_never_followed(
    client: httpx.Client, server: StorageServer, folder: str, outside: Path
) -> None:
    root = server.local().folder_root(folder)
    (root / "data").mkdir()
    (root / "data" / "real.txt").write_text("real")
    (root / "leak").symlink_to(outside / "secret.txt")
    (root / "out").symlink_to(outside)
    (root / "inner").symlink_to("data")  # pointing inside: refused all the same
    base = folder_url(server, folder)

    def get(op: str, path: str) -> httpx.Response:
        return client.get(
            f"{base}/{op}", params={"path": path, "token": token(op, folder, prefix=True)}
        )

    for op, path in [
        ("download", "leak"),
        ("download", "out/secret.txt"),
        ("download", "inner/real.txt"),
        ("list", "out"),
        ("list", "inner"),
        ("archive", "out"),
        ("archive", "inner"),
    ]:
        assert "symlink" in refused(get(op, path), 403, "symlink_refused")
    listed = {e["name"]: e["type"] for e in get("list", "").json()["entries"]}
    assert listed == {"data": "directory", "leak": "symlink", "out": "symlink", "inner": "symlink"}
    with tarfile.open(fileobj=io.BytesIO(get("archive", "").content)) as archive:
        assert sorted(archive.getnames()) == [folder, f"{folder}/data", f"{folder}/data/real.txt"]
    grant = token("upload", folder, prefix=True)
    for target in ("out/new.txt", "leak", "inner/new.txt"):
        refused(create_upload(client, base, grant, 3, path=target), 403, "symlink_refused")
    for op, body in [
        ("mkdir", {"path": "out/new", "parents": True}),
        ("move", {"from": "data/real.txt", "to": "out/real.txt"}),
        ("move", {"from": "out/secret.txt", "to": "stolen.txt"}),
    ]:
        answer = client.post(
            f"{base}/{op}", json=body, headers=bearer(token(op, folder, prefix=True))
        )
        refused(answer, 403, "symlink_refused")
    # Deleting the link removes the link, never what it points to.
    gone = client.post(
        f"{base}/delete", json={"path": "out"}, headers=bearer(token("delete", folder, "out"))
    )
    assert gone.status_code == 200
    assert os.listdir(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret"


def test_a_symlink_planted_during_an_upload_stops_it_at_the_end(
    client: httpx.Client, server: StorageServer, folder: str, outside: Path
) -> None:
    root = server.local().folder_root(folder)
    (root / "sub").mkdir()
    grant = token("upload", folder, "sub/file.txt")
    created = create_upload(client, folder_url(server, folder), grant, 6)
    location = server.url + created.headers["location"]
    assert patch(client, location, grant, 0, b"abc").status_code == 204
    (root / "sub").rmdir()
    (root / "sub").symlink_to(outside)  # a session swaps the directory for a link
    refused(patch(client, location, grant, 3, b"def"), 403, "symlink_refused")
    assert os.listdir(outside) == ["secret.txt"]


def test_a_fifo_planted_by_a_session_does_not_hang_a_download(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    os.mkfifo(server.local().folder_root(folder) / "pipe")
    answer = client.get(
        f"{folder_url(server, folder)}/download",
        params={"path": "pipe", "token": token("download", folder, "pipe")},
    )
    refused(answer, 409, "not_a_file")


# -- tokens ---------------------------------------------------------------------------


def test_a_token_never_works_for_another_folder_operation_or_path(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    other = f"f-{new_id()[:12]}"
    server.local().create_folder(other)
    try:
        (server.local().folder_root(folder) / "mine.txt").write_text("mine")
        base = folder_url(server, folder)
        url = f"{base}/download"
        cases = [
            (token("download", other, "mine.txt"), "wrong_folder"),
            (token("download", folder, "mine.txt", volume="shared"), "wrong_folder"),
            (token("delete", folder, "mine.txt"), "wrong_operation"),
            (token("list", folder, "mine.txt"), "wrong_operation"),
            (token("download", folder, "other.txt"), "path_not_allowed"),
            (token("download", folder, "mi", prefix=True), "path_not_allowed"),
        ]
        for grant, code in cases:
            answer = client.get(url, params={"path": "mine.txt"}, headers=bearer(grant))
            refused(answer, 403, code)
        # An upload of one folder cannot be continued with a token for another.
        mine = token("upload", folder, "u.bin")
        created = create_upload(client, base, mine, 4)
        location = server.url + created.headers["location"]
        theirs = token("upload", other, "u.bin")
        refused(patch(client, location, theirs, 0, b"abcd"), 403, "wrong_folder")
        elsewhere = token("upload", folder, "v.bin")
        refused(patch(client, location, elsewhere, 0, b"abcd"), 403, "path_not_allowed")
        sideways = location.replace(f"/{folder}/", f"/{other}/")
        refused(patch(client, sideways, theirs, 0, b"abcd"), 404, "upload_not_found")
    finally:
        server.local().remove_folder(other)


def test_missing_expired_forged_and_reused_tokens_are_refused(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    (server.local().folder_root(folder) / "f.txt").write_text("f")
    url = f"{folder_url(server, folder)}/download?path=f.txt"
    refused(client.get(url), 401, "token_missing")
    refused(client.get(url, headers={"Authorization": "Basic abc"}), 401, "token_missing")
    refused(client.get(url, headers=bearer("v1.abc.def")), 401, "token_invalid")
    forged = token("download", folder, "f.txt")[:-4] + "AAAA"
    refused(client.get(url, headers=bearer(forged)), 401, "token_invalid")
    expired = token("download", folder, "f.txt", ttl_s=-1)
    refused(client.get(url, headers=bearer(expired)), 401, "token_expired")
    once = token("download", folder, "f.txt", once=True)
    assert client.get(url, headers=bearer(once)).content == b"f"
    refused(client.get(url, headers=bearer(once)), 401, "token_used")
    upload_once = token("upload", folder, "g.txt", once=True)
    base = folder_url(server, folder)
    created = create_upload(client, base, upload_once, 2)
    assert created.status_code == 201
    # Spent on creation; the upload it created still takes its bytes.
    refused(create_upload(client, base, upload_once, 2), 401, "token_used")
    done = patch(client, server.url + created.headers["location"], upload_once, 0, b"gg")
    assert done.status_code == 204


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

    part = server.local().upload_area() / f"{location.rsplit('/', 1)[1]}.part"

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


# -- errors ---------------------------------------------------------------------------


def test_bad_input_gets_a_json_error_never_a_500(
    client: httpx.Client, server: StorageServer, folder: str
) -> None:
    base = folder_url(server, folder)
    mkdir = bearer(token("mkdir", folder, prefix=True))
    for body in [b"{", b"[]", b'{"path": 5}', b'{"path": "a", "extra": 1}', b"\xff\xfe"]:
        answer = client.post(f"{base}/mkdir", content=body, headers=mkdir)
        refused(answer, 400, "bad_body")
    refused(
        client.post(f"{base}/mkdir", content=b" " * 70_000, headers=mkdir), 413, "body_too_large"
    )
    listed = client.get(f"{base}/list", params={"limit": "0", "token": token("list", folder)})
    refused(listed, 400, "bad_limit")
    refused(client.get(f"{base}/nowhere"), 404, "no_route")
    refused(client.put(f"{base}/list"), 405, "method_not_allowed")
    missing = client.get(
        f"{folder_url(server, 'no-such-folder')}/list",
        params={"token": token("list", "no-such-folder")},
    )
    refused(missing, 404, "folder_not_found")
    no_volume = client.get(
        f"{folder_url(server, folder, 'nope')}/list",
        params={"token": token("list", folder, volume="nope")},
    )
    refused(no_volume, 404, "unknown_volume")
    absent = client.get(
        f"{base}/download", params={"path": "absent", "token": token("download", folder, "absent")}
    )
    refused(absent, 404, "not_found")
    directory = client.get(f"{base}/download", params={"token": token("download", folder)})
    refused(directory, 409, "is_a_directory")


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
