"""The storage data plane under a real uvicorn: token misuse, and bad input answered with a JSON
error, never a 500."""

from __future__ import annotations

import httpx

from schemas.ids import new_id
from tests.integration.storage_dataplane.support import refused
from tests.integration.storage_support import (
    StorageServer,
    bearer,
    create_upload,
    folder_url,
    patch,
    token,
)

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
