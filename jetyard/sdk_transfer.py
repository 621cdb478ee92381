"""The bytes of a virtual folder, between this machine and the storage data plane: resumable
tus uploads, ranged downloads into a partial file, directories (one upload per file up,
an archive down), listings, mkdir, move, delete. Talks HTTP only, with short-lived tokens
the gateway issues (``Grants``); never reads a file whole (docs/storage.md, "The HTTP API").
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from jetyard.sdk_base import JetyardError
from jetyard.sdk_unpack import ArchiveFeed, unpack_into

Progress = Callable[[int, int | None], None]
"""Called with (bytes done, bytes in all); the total is None where it is not known ahead
(a directory's archive)."""

Send = Callable[["Access"], Awaitable[httpx.Response]]
TUS = {"Tus-Resumable": "1.0.0"}
OFFSET_TYPE = "application/offset+octet-stream"
PART_SUFFIX = ".jetyard-part"
"""A download in progress: ``<target>.jetyard-part``, beside ``<target>.jetyard-part.etag``
(the version it holds), renamed into place when complete."""
_REFRESH = frozenset({"token_expired", "token_used"})
_RETRY_STATUS = frozenset({423, 502, 503, 504})


@dataclass(frozen=True)
class Access:
    """A token for one operation on one folder, and the URL of that operation."""

    url: str
    token: str
    operation: str
    path: str = ""
    max_bytes: int | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class Grants(Protocol):
    """Issues tokens for one folder (the gateway's ``vfolderAccess``)."""

    def __call__(
        self, operation: str, path: str, *, size: int | None = None, prefix: bool = False
    ) -> Awaitable[Access]: ...


@dataclass(frozen=True)
class Entry:
    name: str
    type: str
    """``file``, ``directory``, ``symlink`` or ``other``."""
    size: int
    mtime: str
    """ISO 8601, with its time zone."""
    safe: bool
    """False for a name on disk the path rules refuse: listed, not addressable."""


class _Retryable(Exception):
    """A broken connection, a busy upload, or a token to renew: try again."""

    def __init__(self, reason: str, refresh: bool = False) -> None:
        super().__init__(reason)
        self.refresh = refresh


def refusal(response: httpx.Response) -> JetyardError:
    """The data plane's ``{"error", "message"}`` as the SDK's error."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "message" in body:
        return JetyardError(str(body["message"]), response.status_code, code=body.get("error"))
    text = response.text.strip()[:300] or response.reason_phrase
    return JetyardError(
        f"the storage service answered {response.status_code}: {text}", response.status_code
    )


def _check(response: httpx.Response) -> None:
    """Raise ``_Retryable`` for what a retry mends, ``JetyardError`` for the rest."""
    if response.status_code < 400:
        return
    error = refusal(response)
    # A HEAD answer has no body to say why: a 401 there is taken as a token to renew.
    if error.code in _REFRESH or (response.status_code == 401 and error.code is None):
        raise _Retryable(str(error), refresh=True)
    if response.status_code in _RETRY_STATUS:
        raise _Retryable(str(error))
    raise error


def _entry(listed: dict[str, Any]) -> Entry:
    return Entry(
        name=listed["name"],
        type=listed["type"],
        size=int(listed.get("size") or 0),
        mtime=str(listed.get("mtime") or ""),
        safe=bool(listed.get("safe", True)),
    )


def remote_join(directory: str, name: str) -> str:
    return f"{directory}/{name}" if directory else name


class _Tally:
    """Bytes done across the files of one call, reported to ``progress``."""

    def __init__(self, total: int | None, progress: Progress | None) -> None:
        self.total, self.done, self.progress = total, 0, progress

    def set(self, done: int) -> None:
        self.done = done
        if self.progress is not None:
            self.progress(self.done, self.total)

    def add(self, count: int) -> None:
        self.set(self.done + count)


class FolderFiles:
    """The files of one folder. ``grants`` issues its tokens; ``http`` is a plain client (the
    token is the only credential the data plane takes)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        grants: Grants,
        *,
        chunk_bytes: int = 1 << 20,
        patch_bytes: int = 64 << 20,
        retries: int = 10,
        retry_delay_s: float = 0.2,
    ) -> None:
        self._http, self._grants = http, grants
        self.chunk_bytes, self.patch_bytes = chunk_bytes, patch_bytes
        self.retries, self.retry_delay_s = retries, retry_delay_s

    # ---- small operations -------------------------------------------------------------------

    async def _call(
        self, operation: str, path: str, send: Send, *, prefix: bool = False
    ) -> httpx.Response:
        access = await self._grants(operation, path, prefix=prefix)
        for attempt in range(self.retries + 1):
            try:
                response = await send(access)
                _check(response)
                return response
            except (httpx.TransportError, _Retryable) as exc:
                if attempt == self.retries:
                    raise JetyardError(f"{operation} {path!r} failed: {exc}") from exc
                if isinstance(exc, _Retryable) and exc.refresh:
                    access = await self._grants(operation, path, prefix=prefix)
                await asyncio.sleep(self.retry_delay_s * (attempt + 1))
        raise AssertionError("unreachable")

    async def ls(self, path: str = "") -> list[Entry]:
        """Every entry of directory ``path`` (all pages), in byte order of names."""
        entries: list[Entry] = []
        after = ""
        while True:
            params = {"path": path, "after": after}

            def page_of(
                access: Access, params: dict[str, str] = params
            ) -> Awaitable[httpx.Response]:
                return self._http.get(access.url, params=params, headers=access.headers)

            page = (await self._call("list", path, page_of)).json()
            entries += [_entry(e) for e in page["entries"]]
            if not page.get("more") or not page.get("next_after"):
                return entries
            after = page["next_after"]

    async def mkdir(self, path: str, *, parents: bool = True, exist_ok: bool = False) -> None:
        try:
            await self._call(
                "mkdir",
                path,
                lambda a: self._http.post(
                    a.url, json={"path": path, "parents": parents}, headers=a.headers
                ),
            )
        except JetyardError as exc:
            if not (exist_ok and exc.code == "exists"):
                raise

    async def rm(self, path: str, *, recursive: bool = False) -> None:
        await self._call(
            "delete",
            path,
            lambda a: self._http.post(
                a.url, json={"path": path, "recursive": recursive}, headers=a.headers
            ),
        )

    async def mv(self, source: str, target: str) -> None:
        # One token must cover both paths: the folder's root, with everything beneath it.
        body = {"from": source, "to": target}
        await self._call(
            "move", "", lambda a: self._http.post(a.url, json=body, headers=a.headers), prefix=True
        )

    # ---- uploads --------------------------------------------------------------------------

    async def upload(self, local: Path, remote: str = "", progress: Progress | None = None) -> int:
        """Upload a file, or a directory tree, to ``remote`` (``""``: the local name at the
        folder's root; ending in ``/``: the local name inside that directory). Symlinks are
        not followed (skipped). The bytes sent."""
        local = Path(local)
        if remote == "" or remote.endswith("/"):
            remote = remote + local.resolve().name
        if not local.is_dir():
            size = os.stat(local).st_size
            tally = _Tally(size, progress)
            await self._upload_file(local, remote, size, tally)
            return size
        files: list[tuple[Path, str, int]] = []
        directories: list[str] = [remote]
        for top, dirs, names in os.walk(local):  # os.walk never follows links by default
            base = Path(top).relative_to(local).as_posix()
            where = remote if base == "." else f"{remote}/{base}"
            directories += [
                f"{where}/{d}" for d in sorted(dirs) if not (Path(top) / d).is_symlink()
            ]
            for name in sorted(names):
                path = Path(top) / name
                if path.is_symlink() or not path.is_file():
                    continue
                files.append((path, f"{where}/{name}", path.stat().st_size))
        tally = _Tally(sum(size for _, _, size in files), progress)
        for directory in directories:
            await self.mkdir(directory, parents=True, exist_ok=True)
        for path, target, size in files:
            await self._upload_file(path, target, size, tally)
        return tally.done

    async def _upload_file(self, local: Path, remote: str, size: int, tally: _Tally) -> None:
        base = tally.done
        access = await self._grants("upload", remote, size=size)
        location = await self._create_upload(access, remote, size)
        offset, failures = 0, 0
        fd = os.open(local, os.O_RDONLY | os.O_CLOEXEC)
        try:
            while offset < size:
                try:
                    offset = await self._patch(fd, location, access, offset, size, tally)
                    failures = 0
                except (httpx.TransportError, _Retryable) as exc:
                    failures += 1
                    if failures > self.retries:
                        raise JetyardError(f"uploading {remote!r} failed: {exc}") from exc
                    await asyncio.sleep(self.retry_delay_s * failures)
                    if isinstance(exc, _Retryable) and exc.refresh:
                        access = await self._grants("upload", remote, size=size)
                    with contextlib.suppress(httpx.TransportError, _Retryable):
                        offset = await self._offset(location, access)
                tally.set(base + offset)
        finally:
            os.close(fd)

    async def _create_upload(self, access: Access, remote: str, size: int) -> str:
        path = base64.b64encode(remote.encode()).decode()
        headers = {
            **TUS,
            **access.headers,
            "Upload-Length": str(size),
            "Upload-Metadata": f"path {path}",
        }
        try:
            response = await self._http.post(access.url, headers=headers)
        except httpx.TransportError as exc:
            raise JetyardError(f"cannot reach the storage service at {access.url}: {exc}") from exc
        if response.status_code != 201:
            raise refusal(response)
        return str(httpx.URL(access.url).join(response.headers["location"]))

    async def _offset(self, location: str, access: Access) -> int:
        response = await self._http.head(location, headers={**TUS, **access.headers})
        _check(response)
        return int(response.headers["upload-offset"])

    async def _patch(
        self, fd: int, location: str, access: Access, offset: int, size: int, tally: _Tally
    ) -> int:
        """Send one PATCH of up to ``patch_bytes`` from ``offset``; the new offset."""
        length = min(self.patch_bytes, size - offset)

        async def body() -> AsyncIterator[bytes]:
            at, end = offset, offset + length
            while at < end:
                piece = await asyncio.to_thread(os.pread, fd, min(self.chunk_bytes, end - at), at)
                if not piece:
                    raise JetyardError("the local file shrank while it was uploaded")
                at += len(piece)
                yield piece
                tally.add(len(piece))

        headers = {
            **TUS,
            **access.headers,
            "Upload-Offset": str(offset),
            "Content-Type": OFFSET_TYPE,
            "Content-Length": str(length),
        }
        response = await self._http.patch(location, headers=headers, content=body())
        if response.status_code == 409 and "upload-offset" in response.headers:
            return int(response.headers["upload-offset"])  # the server is elsewhere: go on there
        _check(response)
        return int(response.headers["upload-offset"])

    # ---- downloads ------------------------------------------------------------------------

    async def download(self, remote: str, local: Path, progress: Progress | None = None) -> int:
        """Download file ``remote`` to ``local`` (replacing it), resuming a partial download
        left beside it; or, if ``remote`` is a directory, its tree into ``local``, which must
        not exist yet. The bytes received."""
        local = Path(local)
        try:
            return await self._download_file(remote, local, progress)
        except JetyardError as exc:
            if exc.code not in ("is_a_directory",):
                raise
        return await self._download_tree(remote, local, progress)

    async def _download_file(self, remote: str, local: Path, progress: Progress | None) -> int:
        part = local.with_name(local.name + PART_SUFFIX)
        tag_file = local.with_name(local.name + PART_SUFFIX + ".etag")
        tag = tag_file.read_text().strip() if tag_file.exists() and part.exists() else None
        have = part.stat().st_size if tag else 0
        access = await self._grants("download", remote)
        tally = _Tally(None, progress)
        failures = 0
        while True:
            headers = dict(access.headers)
            if have and tag:
                headers |= {"Range": f"bytes={have}-", "If-Range": tag}
            try:
                async with self._http.stream(
                    "GET", access.url, params={"path": remote}, headers=headers
                ) as response:
                    if response.status_code == 416 and have:
                        have, tag = 0, None  # the partial file is not of this version
                        continue
                    if response.status_code >= 400:
                        await response.aread()
                        _check(response)
                    if response.status_code == 200:
                        have = 0
                    tag = response.headers.get("etag")
                    tally.total = have + int(response.headers["content-length"])
                    tally.set(have)
                    if tag:
                        tag_file.write_text(tag)
                    have = await self._receive(response, part, have, tally)
                if have == tally.total:
                    break
                raise _Retryable("the download stopped early")
            except (httpx.TransportError, _Retryable) as exc:
                failures += 1
                if failures > self.retries:
                    raise JetyardError(f"downloading {remote!r} failed: {exc}") from exc
                if isinstance(exc, _Retryable) and exc.refresh:
                    access = await self._grants("download", remote)
                have = part.stat().st_size if part.exists() else 0
                await asyncio.sleep(self.retry_delay_s * failures)
        os.replace(part, local)
        tag_file.unlink(missing_ok=True)
        return tally.done

    async def _receive(self, response: httpx.Response, part: Path, have: int, tally: _Tally) -> int:
        """Write the body at ``have`` in ``part`` (truncated there); the size reached."""
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, have)
            # As the bytes arrive, not gathered into chunks: a cut loses nothing received.
            async for chunk in response.aiter_bytes():
                await asyncio.to_thread(os.pwrite, fd, chunk, have)
                have += len(chunk)
                tally.set(have)
        finally:
            os.close(fd)
        return have

    async def _download_tree(self, remote: str, local: Path, progress: Progress | None) -> int:
        if await asyncio.to_thread(os.path.lexists, local):
            raise JetyardError(f"{local} exists: a directory is downloaded to a new path")
        access = await self._grants("archive", remote)
        tally = _Tally(None, progress)
        feed = ArchiveFeed()
        unpacking = asyncio.create_task(asyncio.to_thread(unpack_into, feed, local))
        try:
            async with self._http.stream(
                "GET", access.url, params={"path": remote}, headers=access.headers
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise refusal(response)
                async for chunk in response.aiter_bytes(self.chunk_bytes):
                    if not await asyncio.to_thread(feed.put, chunk):
                        break  # the unpacker stopped: its error says why
                    tally.add(len(chunk))
        except BaseException as exc:
            cut = isinstance(exc, httpx.TransportError)
            error = JetyardError(f"the archive of {remote!r} was cut off: {exc}") if cut else exc
            feed.fail(error)
            with contextlib.suppress(BaseException):
                await unpacking  # it removes what it had unpacked
            if cut:
                raise error from exc
            raise
        feed.close()
        await unpacking
        return tally.done
