"""The storage data plane under a real uvicorn: ranged downloads, archives and the directory
operations (list, mkdir, move, delete, pages)."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import httpx

from tests.integration.storage_dataplane.support import MiB, listing, refused, upload
from tests.integration.storage_support import (
    StorageServer,
    bearer,
    folder_url,
    token,
)

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
