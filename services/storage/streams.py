"""Blocking byte producers (reads from disk) turned into async response bodies, read ahead
by one chunk in a worker thread, so memory holds two chunks per response."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator

from anyio import to_thread


async def in_threads(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """Each chunk produced in a worker thread, the next one while the current one is sent
    (two chunks in memory at most). ``chunks`` is closed once no thread is in it."""
    reading = asyncio.ensure_future(to_thread.run_sync(next, chunks, None))
    try:
        while (chunk := await reading) is not None:
            reading = asyncio.ensure_future(to_thread.run_sync(next, chunks, None))
            yield chunk
    finally:
        if reading.done():
            _close(chunks, reading)
        else:  # a read still in its thread must not meet a closed (or reused) descriptor
            reading.add_done_callback(lambda done: _close(chunks, done))


def _close(chunks: Iterator[bytes], reading: asyncio.Future[bytes | None]) -> None:
    if not reading.cancelled():
        reading.exception()  # seen: nobody is left to receive it
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


class FileChunks:
    """``length`` bytes of ``fd`` from ``start`` in chunks; owns ``fd`` and closes it when
    done, closed or collected (a response never started must not leak it). A file that
    shrank ends early: the server then ends the response short and the client sees it."""

    def __init__(self, fd: int, start: int, length: int, chunk_bytes: int) -> None:
        self._fd, self._position, self._end = fd, start, start + length
        self._chunk_bytes = chunk_bytes

    def __iter__(self) -> FileChunks:
        return self

    def __next__(self) -> bytes:
        if self._fd < 0 or self._position >= self._end:
            self.close()
            raise StopIteration
        size = min(self._chunk_bytes, self._end - self._position)
        chunk = os.pread(self._fd, size, self._position)
        if not chunk:
            self.close()
            raise StopIteration
        self._position += len(chunk)
        return chunk

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)

    def __del__(self) -> None:
        self.close()
