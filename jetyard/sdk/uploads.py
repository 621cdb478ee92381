"""Uploads into a virtual folder: a file as a resumable tus upload, sent in PATCHes from
where the server says it is after a cut, with tokens renewed as they expire; a directory as
one upload per file (symlinks skipped). Talks HTTP only, to the storage data plane."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.transfer import (
    OFFSET_TYPE,
    TUS,
    Access,
    FileCalls,
    Progress,
    Retryable,
    Tally,
    check,
    plane_refusal,
)


class Uploads(FileCalls):
    """The uploads of one folder's files (``FolderFiles`` is the whole)."""

    async def upload(self, local: Path, remote: str = "", progress: Progress | None = None) -> int:
        """Upload a file, or a directory tree, to ``remote`` (``""``: the local name at the
        folder's root; ending in ``/``: the local name inside that directory). Symlinks are
        not followed (skipped). The bytes sent."""
        local = Path(local)
        if remote == "" or remote.endswith("/"):
            remote = remote + local.resolve().name
        if not local.is_dir():
            size = os.stat(local).st_size
            tally = Tally(size, progress)
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
        tally = Tally(sum(size for _, _, size in files), progress)
        for directory in directories:
            await self.mkdir(directory, parents=True, exist_ok=True)
        for path, target, size in files:
            await self._upload_file(path, target, size, tally)
        return tally.done

    async def _upload_file(self, local: Path, remote: str, size: int, tally: Tally) -> None:
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
                except (httpx.TransportError, Retryable) as exc:
                    failures += 1
                    if failures > self.retries:
                        raise JetyardError(f"uploading {remote!r} failed: {exc}") from exc
                    await asyncio.sleep(self.retry_delay_s * failures)
                    if isinstance(exc, Retryable) and exc.refresh:
                        access = await self._grants("upload", remote, size=size)
                    with contextlib.suppress(httpx.TransportError, Retryable):
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
            raise plane_refusal(response)
        return str(httpx.URL(access.url).join(response.headers["location"]))

    async def _offset(self, location: str, access: Access) -> int:
        response = await self._http.head(location, headers={**TUS, **access.headers})
        check(response)
        return int(response.headers["upload-offset"])

    async def _patch(
        self, fd: int, location: str, access: Access, offset: int, size: int, tally: Tally
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
        check(response)
        return int(response.headers["upload-offset"])
