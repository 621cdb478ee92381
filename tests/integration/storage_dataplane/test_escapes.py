"""The storage data plane under a real uvicorn: every escape attempt of issue 13 item 5 (paths,
symlinks, a FIFO) is refused or never followed."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import httpx
import pytest

from tests.integration.storage_dataplane.support import listing, refused
from tests.integration.storage_support import (
    StorageServer,
    bearer,
    create_upload,
    folder_url,
    patch,
    token,
)

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
