"""The SDK's folder transfers (``jetyard.sdk.files``) against the real storage data plane
(a uvicorn subprocess on real files), with tokens issued here as the gateway issues them:
uploads broken mid-PATCH and resumed (with a fresh token once the first expired), downloads
cut off and resumed by range (in the same call and in a later one), directory trees both
ways, the directory operations, quotas, and flat client memory."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from jetyard.sdk import JetyardError
from jetyard.sdk.files import FolderFiles
from jetyard.sdk.transfer import PART_SUFFIX, Access
from schemas.ids import new_id
from tests.integration.storage_support import StorageServer, folder_url, running, token

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageServer]:
    root = tmp_path_factory.mktemp("storage")
    with running(root, chunk_bytes=64 * 1024, list_limit=3) as started:
        yield started


@pytest.fixture
def folder(server: StorageServer) -> Iterator[str]:
    folder_id = f"f-{new_id()[:12]}"
    server.local().create_folder(folder_id)
    yield folder_id
    server.local().remove_folder(folder_id)


class Grants:
    """Tokens as ``vfolderAccess`` issues them: uploads one-use and sized; every issue kept."""

    ROUTES = {"upload": "uploads"}

    def __init__(self, server: StorageServer, folder: str, ttl_s: float = 300) -> None:
        self.server, self.folder, self.ttl_s = server, folder, ttl_s
        self.issued: list[tuple[str, str]] = []

    async def __call__(
        self, operation: str, path: str, *, size: int | None = None, prefix: bool = False
    ) -> Access:
        self.issued.append((operation, path))
        once = operation == "upload"
        try:
            text = token(
                operation,
                self.folder,
                path,
                prefix=prefix,
                ttl_s=self.ttl_s,
                once=once,
                max_bytes=size if once else None,
            )
        except ValueError as exc:  # the gateway refuses to sign an unsafe path
            raise JetyardError(str(exc), code="invalid") from None
        url = f"{folder_url(self.server, self.folder)}/{self.ROUTES.get(operation, operation)}"
        return Access(url=url, token=text, operation=operation, path=path, max_bytes=size)


class Cutter(httpx.AsyncHTTPTransport):
    """A real transport that breaks the first PATCH after ``patch_after`` bytes of its body
    (optionally waiting first), and cuts the body of the first ``download`` answer after
    ``download_after`` bytes; it records the Range of every download request."""

    def __init__(
        self,
        *,
        patch_after: int | None = None,
        download_after: int | None = None,
        pause_s: float = 0.0,
    ) -> None:
        super().__init__()
        self.patch_after, self.download_after, self.pause_s = patch_after, download_after, pause_s
        self.ranges: list[str | None] = []
        self.received = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "PATCH" and self.patch_after is not None:
            limit, self.patch_after = self.patch_after, None
            request = httpx.Request(
                request.method,
                request.url,
                headers=request.headers,
                content=self._cut_body(request, limit),
            )
        response = await super().handle_async_request(request)
        if request.method == "GET" and request.url.path.endswith("/download"):
            self.ranges.append(request.headers.get("range"))
            cut, self.download_after = self.download_after, None
            assert isinstance(response.stream, httpx.AsyncByteStream)
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=_Counted(self, response.stream, cut),
                extensions=response.extensions,
            )
        return response

    async def _cut_body(self, request: httpx.Request, limit: int) -> AsyncIterator[bytes]:
        sent = 0
        assert isinstance(request.stream, httpx.AsyncByteStream)
        async for chunk in request.stream:
            if sent + len(chunk) >= limit:
                yield chunk[: limit - sent]
                await asyncio.sleep(self.pause_s)
                raise httpx.WriteError("connection broken by the test")
            sent += len(chunk)
            yield chunk


class _Counted(httpx.AsyncByteStream):
    def __init__(self, owner: Cutter, inner: httpx.AsyncByteStream, limit: int | None) -> None:
        self.owner, self.inner, self.limit = owner, inner, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self.inner:
            if self.limit is not None and seen + len(chunk) >= self.limit:
                self.owner.received += self.limit - seen
                yield chunk[: self.limit - seen]
                raise httpx.ReadError("connection broken by the test")
            seen += len(chunk)
            self.owner.received += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def random_file(path: Path, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "wb") as out:
        left = size
        while left:
            piece = os.urandom(min(left, MiB))
            digest.update(piece)
            out.write(piece)
            left -= len(piece)
    return digest.hexdigest()


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as source:
        while piece := source.read(MiB):
            digest.update(piece)
    return digest.hexdigest()


def files_of(
    server: StorageServer,
    folder: str,
    transport: httpx.AsyncBaseTransport | None = None,
    grants: Grants | None = None,
    **options: int,
) -> tuple[FolderFiles, Grants, httpx.AsyncClient]:
    http = httpx.AsyncClient(timeout=60, transport=transport)
    grants = grants or Grants(server, folder)
    return FolderFiles(http, grants, retry_delay_s=0.05, **options), grants, http


async def test_an_upload_broken_mid_patch_resumes_with_a_fresh_token(
    server: StorageServer, folder: str, tmp_path: Path
) -> None:
    source = tmp_path / "big.bin"
    digest = random_file(source, 6 * MiB + 123)
    # The first PATCH breaks after 2.5 MiB, and stays broken until the 3 s tokens expired.
    cutter = Cutter(patch_after=5 * MiB // 2, pause_s=4.0)
    grants = Grants(server, folder, ttl_s=3)
    files, grants, http = files_of(server, folder, cutter, grants, patch_bytes=4 * MiB)
    seen: list[tuple[int, int | None]] = []
    async with http:
        sent = await files.upload(source, "in/big.bin", progress=lambda d, t: seen.append((d, t)))
    stored = server.local().folder_root(folder) / "in" / "big.bin"
    assert sha256(stored) == digest
    assert sent == stored.stat().st_size == 6 * MiB + 123
    assert seen[-1] == (sent, sent) and all(t == sent for _, t in seen)
    # Resumed, not restarted: progress fell back only to what the server had kept.
    lowest_after_break = min(d for d, _ in seen[seen.index(max(seen)) :])
    assert lowest_after_break > 0
    assert grants.issued.count(("upload", "in/big.bin")) >= 2  # the expired one was replaced


async def test_a_download_cut_off_resumes_by_range_in_the_same_call_and_the_next(
    server: StorageServer, folder: str, tmp_path: Path
) -> None:
    data = tmp_path / "model.bin"
    digest = random_file(data, 3 * MiB + 7)
    files, _, http = files_of(server, folder)
    async with http:
        await files.upload(data, "model.bin")
    target = tmp_path / "copy.bin"

    cutter = Cutter(download_after=MiB + 5)
    files, _, http = files_of(server, folder, cutter)
    async with http:
        await files.download("model.bin", target)
    assert sha256(target) == digest
    assert cutter.ranges[0] is None and cutter.ranges[1] == f"bytes={MiB + 5}-"
    assert cutter.received == 3 * MiB + 7  # nothing fetched twice
    assert not target.with_name(target.name + PART_SUFFIX).exists()

    # A call that gives up leaves its partial file; the next call resumes from it.
    later = tmp_path / "later.bin"
    cutter = Cutter(download_after=2 * MiB)
    files, _, http = files_of(server, folder, cutter, retries=0)
    async with http:
        with pytest.raises(JetyardError, match=r"downloading 'model\.bin' failed"):
            await files.download("model.bin", later)
    assert later.with_name(later.name + PART_SUFFIX).stat().st_size == 2 * MiB
    cutter = Cutter()
    files, _, http = files_of(server, folder, cutter)
    async with http:
        await files.download("model.bin", later)
    assert sha256(later) == digest
    assert cutter.ranges == [f"bytes={2 * MiB}-"] and cutter.received == MiB + 7


async def test_a_directory_tree_goes_up_and_comes_back_identical(
    server: StorageServer, folder: str, tmp_path: Path
) -> None:
    tree = tmp_path / "dataset"
    (tree / "train" / "deep").mkdir(parents=True)
    (tree / "empty").mkdir()
    random_file(tree / "train" / "a.bin", 300_000)
    (tree / "train" / "deep" / "notes-é.txt").write_text("naïve\n")
    for n in range(5):  # more entries than one listing page (3)
        (tree / f"f{n}.txt").write_text(str(n))
    (tree / "link").symlink_to("/etc/passwd")  # never followed, never sent
    files, _, http = files_of(server, folder)
    progress: list[tuple[int, int | None]] = []
    async with http:
        sent = await files.upload(tree, "", progress=lambda d, t: progress.append((d, t)))
        listed = await files.ls("dataset")
        back = tmp_path / "back"
        await files.download("dataset", back)
    assert progress[-1] == (sent, sent) == (300_000 + 7 + 5, 300_000 + 7 + 5)
    names = [entry.name for entry in listed]
    assert names == ["empty", "f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt", "train"]

    def contents(root: Path) -> dict[str, str | None]:
        return {
            p.relative_to(root).as_posix(): None if p.is_dir() else sha256(p)
            for p in root.rglob("*")
            if not p.is_symlink()
        }

    assert contents(back) == contents(tree)
    assert not (back / "link").exists()
    assert [name for name in os.listdir(tmp_path) if "jetyard-unpack" in name] == []


async def test_mkdir_move_delete_and_their_refusals(
    server: StorageServer, folder: str, tmp_path: Path
) -> None:
    note = tmp_path / "n.txt"
    note.write_text("x")
    files, _, http = files_of(server, folder)
    async with http:
        await files.mkdir("a/b")
        await files.mkdir("a/b")  # with its parents, as mkdir -p: already there is fine
        with pytest.raises(JetyardError) as exists:
            await files.mkdir("a/b", parents=False)
        assert exists.value.code == "exists" and exists.value.status == 409
        await files.upload(note, "a/b/")
        await files.mv("a/b/n.txt", "a/m.txt")
        assert [e.name for e in await files.ls("a")] == ["b", "m.txt"]
        with pytest.raises(JetyardError) as not_empty:
            await files.rm("a")
        assert not_empty.value.code == "not_empty"
        await files.rm("a", recursive=True)
        assert await files.ls("") == []
        with pytest.raises(JetyardError) as unsafe:
            await files.ls("../etc")
        assert unsafe.value.code == "invalid" and "'..'" in str(unsafe.value)


async def test_an_upload_over_the_quota_is_refused_with_the_servers_words(
    server: StorageServer, folder: str, tmp_path: Path
) -> None:
    server.local().set_quota(folder, 100_000)
    big = tmp_path / "big.bin"
    random_file(big, 150_000)
    files, _, http = files_of(server, folder)
    async with http:
        with pytest.raises(JetyardError) as refused:
            await files.upload(big, "big.bin")
        assert await files.ls("") == []
    assert refused.value.status == 413 and refused.value.code == "quota_exceeded"
    assert "quota" in str(refused.value)


async def test_client_memory_stays_flat_both_ways(
    server: StorageServer, folder: str, tmp_path: Path
) -> None:
    source = tmp_path / "flat.bin"
    digest = random_file(source, 48 * MiB)
    files, _, http = files_of(server, folder)
    async with http:
        tracemalloc.start()
        try:
            started = time.monotonic()
            await files.upload(source, "flat.bin")
            _, upload_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            await files.download("flat.bin", tmp_path / "flat-back.bin")
            _, download_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert sha256(tmp_path / "flat-back.bin") == digest
    assert upload_peak < 8 * MiB, upload_peak
    assert download_peak < 8 * MiB, download_peak
    assert time.monotonic() - started < 120
