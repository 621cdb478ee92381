"""Downloads from a virtual folder: a file by ranged GETs into ``<target>.jetyard-part``
(resumed where it stopped while the file is the same version), renamed into place when
complete; a directory as one archive, unpacked safely as it arrives (``jetyard.sdk.unpack``).
Talks HTTP only, to the storage data plane."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import httpx

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.transfer import (
    PART_SUFFIX,
    FileCalls,
    Progress,
    Retryable,
    Tally,
    check,
    plane_refusal,
)
from jetyard.sdk.unpack import ArchiveFeed, unpack_into


class Downloads(FileCalls):
    """The downloads of one folder's files (``FolderFiles`` is the whole)."""

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
        tally = Tally(None, progress)
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
                        check(response)
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
                raise Retryable("the download stopped early")
            except (httpx.TransportError, Retryable) as exc:
                failures += 1
                if failures > self.retries:
                    raise JetyardError(f"downloading {remote!r} failed: {exc}") from exc
                if isinstance(exc, Retryable) and exc.refresh:
                    access = await self._grants("download", remote)
                have = part.stat().st_size if part.exists() else 0
                await asyncio.sleep(self.retry_delay_s * failures)
        os.replace(part, local)
        tag_file.unlink(missing_ok=True)
        return tally.done

    async def _receive(self, response: httpx.Response, part: Path, have: int, tally: Tally) -> int:
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
        tally = Tally(None, progress)
        feed = ArchiveFeed()
        unpacking = asyncio.create_task(asyncio.to_thread(unpack_into, feed, local))
        try:
            async with self._http.stream(
                "GET", access.url, params={"path": remote}, headers=access.headers
            ) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise plane_refusal(response)
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
