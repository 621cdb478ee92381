"""The bytes of an upload: a PATCH body appended to the part file in ``chunk_bytes``
batches (two at most per upload, whatever its size), the quota checked at the start and
every ``quota_recheck_bytes`` (unless the filesystem enforces it), and the finished part
renamed into place."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from functools import partial

from anyio import to_thread
from starlette.requests import ClientDisconnect

from services.storage import folderfs, foldertree
from services.storage.access import DataPlane, Grant
from services.storage.errors import StorageError
from services.storage.foldertree import Usage
from services.storage.quota import check_room, recheck
from services.storage.upload_state import UploadArea, UploadBusy, UploadState
from services.storage.volumes import Capability
from services.storage.write_behind import start_writeback


async def append_body(
    plane: DataPlane,
    grant: Grant,
    area: UploadArea,
    state: UploadState,
    offset: int,
    body: AsyncIterator[bytes],
    declared: int | None,
) -> int:
    """Append ``body`` (``declared`` bytes long, if said) at ``offset``; finish the upload
    when complete. The new offset."""
    settings = plane.settings
    try:
        fd = await to_thread.run_sync(area.open_part, state)
    except UploadBusy:
        raise StorageError("upload_busy", 423, "another request is writing this upload") from None
    if fd is None:  # finished earlier: only a repeat of the last PATCH may say so
        if offset != state.length:
            raise StorageError(
                "offset_mismatch",
                409,
                "the upload is complete",
                {"Upload-Offset": str(state.length)},
            )
        return state.length
    try:
        size = os.fstat(fd).st_size
    except OSError:
        os.close(fd)
        raise
    writer = _PartWriter(fd, size, settings.chunk_bytes)
    try:
        if offset != writer.position:
            raise StorageError(
                "offset_mismatch",
                409,
                f"the upload is at offset {writer.position}, not {offset}: HEAD, then resume",
                {"Upload-Offset": str(writer.position)},
            )
        if declared is not None and offset + declared > state.length:
            raise StorageError("too_long", 413, "the body runs past Upload-Length")
        room = plane.hooks.owner_room(grant.folder_id)
        quota = await to_thread.run_sync(
            partial(
                check_room, plane.volumes, grant.volume, grant.folder_id, state.length, room,
                plane.now(), upload_id=state.id,
            )
        )  # fmt: skip
        # Where the filesystem enforces the quota, it refuses the write that would pass it
        # (EDQUOT, answered 413): no need to read usage again during the body.
        rechecked = quota is not None and Capability.QUOTA not in grant.volume.capabilities
        await _receive(body, writer, state, grant, rechecked, settings.quota_recheck_bytes)
        touched = state.model_copy(update={"expires": plane.now() + settings.upload_ttl_s})
        await to_thread.run_sync(area.save, touched)
        if writer.position == state.length:
            added = await to_thread.run_sync(_finish, grant, area, touched, fd)
            plane.changed(grant)
            plane.hooks.landed(grant.folder_id, added.bytes)
        return writer.position
    finally:
        writer.close()  # releases the lock


async def _receive(
    body: AsyncIterator[bytes],
    writer: _PartWriter,
    state: UploadState,
    grant: Grant,
    rechecked: bool,
    recheck_bytes: int,
) -> None:
    since_check = 0
    try:
        async for chunk in body:
            if writer.position + writer.pending + len(chunk) > state.length:
                raise StorageError("too_long", 413, "the body runs past Upload-Length")
            await writer.add(chunk)
            since_check += len(chunk)
            if rechecked and since_check >= recheck_bytes:
                since_check = 0
                await to_thread.run_sync(recheck, grant.volume, grant.folder_id, state)
    except ClientDisconnect:
        pass  # keep what arrived: the client resumes from HEAD's offset
    finally:
        await writer.flush()


class _PartWriter:
    """Gathers a body's chunks into ``chunk_bytes`` writes at the part file's end (one
    ``pwritev`` each, no copying into a buffer), each in a thread while the next one fills:
    receiving never waits for the disk, and an upload holds two batches at most. A write ends
    on a ``chunk_bytes`` boundary of the file, the rest of the batch starting the next one
    (whole pages and page-cache folios: the kernel spends ~10 % less on them than on writes
    that straddle them, and the final ``fsync`` finds no half-written page). Each batch's
    write-back starts as soon as it is written (``write_behind``), so that ``fsync`` finds
    little to do. Owns the descriptor: ``close`` it, never close it directly."""

    def __init__(self, fd: int, position: int, chunk_bytes: int) -> None:
        self.fd, self.position, self.chunk_bytes = fd, position, chunk_bytes
        self._batch: list[memoryview] = []
        self._batched = 0
        self._writing: asyncio.Task[None] | None = None
        self._in_flight = 0

    @property
    def pending(self) -> int:
        """Bytes received but not yet on disk."""
        return self._in_flight + self._batched

    async def add(self, chunk: bytes) -> None:
        self._batch.append(memoryview(chunk))
        self._batched += len(chunk)
        if self._batched >= self.chunk_bytes:
            await self._settle()
            end = self.position + self._batched
            self._start(end - end % self.chunk_bytes - self.position)  # > 0: a boundary lies within

    async def flush(self) -> None:
        await self._settle()
        if self._batch:
            self._start(self._batched)
            await self._settle()

    def close(self) -> None:
        """Close the part (releasing its lock) once no write is running on it: a write still
        in its thread after a cancelled request must not meet a reused descriptor."""
        if self._writing is None or self._writing.done():
            os.close(self.fd)
            return

        def close_after(write: asyncio.Task[None]) -> None:
            if not write.cancelled():
                write.exception()  # seen here: the request that wanted it is gone
            os.close(self.fd)

        self._writing.add_done_callback(close_after)

    def _start(self, length: int) -> None:
        """Write the batch's first ``length`` bytes in a thread (nothing is in flight); the
        piece across the cut is split, not copied, and its rest starts the next batch."""
        batch, rest, left = [], [], length
        for piece in self._batch:
            if left >= len(piece):
                batch.append(piece)
                left -= len(piece)
            elif left:
                batch.append(piece[:left])
                rest.append(piece[left:])
                left = 0
            else:
                rest.append(piece)
        self._batch = rest
        self._in_flight, self._batched = length, self._batched - length
        write = to_thread.run_sync(_write_all, self.fd, batch, self.position)
        self._writing = asyncio.ensure_future(write)

    async def _settle(self) -> None:
        if self._writing is not None:
            await self._writing
            self._writing = None
            self.position += self._in_flight
            self._in_flight = 0


def _write_all(fd: int, batch: list[memoryview], position: int) -> None:
    start = position
    views = list(batch)
    while views:
        written = os.pwritev(fd, views, position)
        position += written
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if views:
            views[0] = views[0][written:]
    start_writeback(fd, start, position - start)  # the disk works while the next batch fills


def _finish(grant: Grant, area: UploadArea, state: UploadState, fd: int) -> Usage:
    """Rename the complete part into place (durable first, so a crash never leaves an empty
    file under the final name) and count it where the volume keeps usage; what the folder
    gained."""
    os.fsync(fd)
    area_fd = os.open(area.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with folderfs.open_root(grant.root) as root:
            replaced = folderfs.place_file(area_fd, area.part_name(state.id), root, grant.path)
    finally:
        os.close(area_fd)
    area.save(state.model_copy(update={"completed": True}))
    old = foldertree.one_name(replaced) if replaced is not None else Usage()
    added = Usage(state.length, 1) + -old
    if Capability.FAST_SIZE in grant.volume.capabilities:
        grant.volume.record_change(grant.folder_id, added)
    return added
