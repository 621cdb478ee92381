"""The proxy's client side: HTTP/1.1 to an app over asyncio protocols, answers parsed by
``httptools`` (llhttp, the parser uvicorn uses on the listening side), keep-alive connections
kept per app address (``services.appproxy.pool``). No subjects; no knowledge of routes or who
may pass.

One ``Exchange`` is one connection carrying one request at a time. The forwarder writes the
request itself (``send``/``drain``), then reads the answer's head and body. Body chunks are
queued as they arrive; past ``HIGH_WATER_BYTES`` the connection stops reading until the
forwarder has passed them on, so a slow client slows the app instead of filling memory.

Why not an HTTP client library: a request through httpx cost the proxy ~1 ms of CPU here, 15
times what the bytes need (docs/benchmarks.md); this module is what a proxy needs and no more.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import httptools

if TYPE_CHECKING:
    from services.appproxy.pool import Pool

HIGH_WATER_BYTES = 256 * 1024
"""Queued answer bytes past which the connection stops reading from the app."""


class UpstreamError(Exception):
    """The app could not be reached, broke off, or answered what is not HTTP."""


class ConnectFailed(UpstreamError):
    """A fresh connection could not be opened (refused, unreachable, timed out): nothing was
    sent on it."""


@dataclass(frozen=True, slots=True)
class Head:
    status: int
    headers: list[tuple[bytes, bytes]]
    """As the app sent them, names lower-cased."""
    length: int | None
    """``Content-Length``, when the answer has one."""


class Exchange(asyncio.Protocol):
    """One connection to an app (see the module's docstring)."""

    def __init__(self, key: tuple[str, int], pool: Pool) -> None:
        self.key, self._pool = key, pool
        self._transport: asyncio.Transport | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._head: asyncio.Future[Head] | None = None
        self._headers: list[tuple[bytes, bytes]] = []
        self._chunks: deque[bytes] = deque()
        self._queued = 0
        self._wake: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._error: UpstreamError | None = None
        self._informational = False
        self._head_only = False
        self._keep_alive = False
        self._paused = False
        self.active = False
        self.done = False
        self.closed = False
        self.received = False
        """Whether this exchange got any byte of an answer (a kept connection that the app
        closed meanwhile gets none: the request may then be sent again on a fresh one)."""
        self.idle_since = 0.0
        self.opening: Callable[[], None] | None = None
        """Set by the pool while this fresh connection counts as opening; called once."""

    # The forwarder's side.

    def begin(self, *, head_only: bool) -> None:
        """Start an exchange on this (fresh or kept) connection."""
        self._parser = httptools.HttpResponseParser(self)
        self._head = asyncio.get_running_loop().create_future()
        self._headers, self._chunks, self._queued = [], deque(), 0
        self._error, self._informational, self._head_only = None, False, head_only
        self._keep_alive = False
        self.active, self.done, self.received = True, False, False

    def send(self, data: bytes) -> None:
        if self._transport is None or self.closed:
            raise UpstreamError("the connection to the app is closed")
        self._transport.write(data)

    async def drain(self) -> None:
        """Wait while the app is slower to take the request than the client is to send it."""
        if self._writable is not None:
            await self._writable
        if self.closed and not self.received:
            raise self._error or UpstreamError("the app closed the connection")

    async def head(self) -> Head:
        assert self._head is not None
        return await self._head

    async def read(self) -> bytes | None:
        """The answer's next bytes (what has arrived, joined), or None at its end."""
        while not self._chunks:
            if self._error is not None:
                raise self._error
            if self.done:
                return None
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None
        data = self._chunks.popleft() if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._queued = 0
        if self._paused and self._transport is not None and not self.closed:
            self._paused = False
            self._transport.resume_reading()
        return data

    async def read_all(self) -> bytes:
        parts = []
        while (data := await self.read()) is not None:
            parts.append(data)
        return b"".join(parts)

    @property
    def reusable(self) -> bool:
        return self.done and self._keep_alive and not self._head_only and not self.closed

    def abort(self) -> None:
        """Close the connection (a client that went away, an answer not read to its end)."""
        if self._transport is not None and not self.closed:
            self._transport.abort()

    # asyncio's side.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not derive from asyncio's classes; they have their methods.
        self._transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if not self.active or self._parser is None:
            self.abort()  # bytes nobody asked for: the connection cannot be trusted
            return
        self.received = True
        if self.opening is not None:
            self.opened()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail("the app switched protocols on a plain request")
        except httptools.HttpParserError as exc:
            self._fail(f"the app's answer is not HTTP: {exc}")

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.opened()
        self._pool.forget(self)
        if self.active and not self.done:
            head = self._head
            if head is not None and head.done() and not head.exception() and self._unframed():
                self._finish()  # an answer delimited by the connection's end
            else:
                self._fail("the app closed the connection before its answer was complete")
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # httptools' callbacks.

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        assert self._parser is not None and self._head is not None
        status = self._parser.get_status_code()
        if 100 <= status < 200:
            self._informational, self._headers = True, []  # 100 Continue, 103: not passed on
            return
        self._keep_alive = self._parser.should_keep_alive()
        length = next((v for k, v in self._headers if k == b"content-length"), None)
        head = Head(status, self._headers, int(length) if length is not None else None)
        if not self._head.done():
            self._head.set_result(head)
        if self._head_only:
            self._finish()  # an answer to HEAD has no body, whatever its length says

    def on_body(self, body: bytes) -> None:
        if self.done:
            return
        self._chunks.append(body)
        self._queued += len(body)
        if self._queued > HIGH_WATER_BYTES and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wakeup()

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        self._finish()

    def opened(self) -> None:
        """No longer opening (answered, closed, or held long enough)."""
        done, self.opening = self.opening, None
        if done is not None:
            done()

    # Inside.

    def _unframed(self) -> bool:
        names = {k for k, _ in self._headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _finish(self) -> None:
        self.done = True
        self._wakeup()

    def _fail(self, message: str) -> None:
        self._error = UpstreamError(message)
        if self._head is not None and not self._head.done():
            self._head.set_exception(self._error)
        self._wakeup()
        self.abort()

    def _wakeup(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)
