"""Helpers of the storage data plane tests: an upload in one go, a directory's listing, a
refusal's message."""

from __future__ import annotations

import httpx

from tests.integration.storage_support import (
    StorageServer,
    create_upload,
    folder_url,
    patch,
    token,
)

MiB = 1024 * 1024


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
