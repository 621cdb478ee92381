"""The data plane's HTTP connections: uvicorn's httptools protocol, fed from socket reads of up
to ``chunk_bytes`` into one buffer per thread, each body piece handed to the app as parsed.

Why (``bench/storage_throughput.py``, docs/benchmarks.md "Issue 31: uploads"): uvicorn reads a
socket 256 kB at a time and copies each read four times on its way to the app (the loop's read
into ``bytes``, the parser's body slice, that appended to a ``bytearray``, which is copied into
``bytes`` again), and every read costs a round of Python (parse, wake the app, pause and resume
reading). A plain server reads 1 MiB at a time into the bytes it writes. Here a read fills a
shared buffer (``asyncio.BufferedProtocol``: no ``bytes`` made by the loop), the parser copies
the body out once, and that ``bytes`` reaches the app as it is: a 1 GiB upload's reads went
from ~4,300 to 1,000-2,000 and the data plane's CPU from ~0.75 to ~0.45 s. Everything else
(parsing, keep-alive, flow control, timeouts, shutdown) is uvicorn's own protocol, which this
one wraps.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_buffers = threading.local()


def read_buffer(size: int) -> memoryview:
    """This thread's read buffer of ``size`` bytes. One per thread, not per connection: a
    read is parsed before the loop reads any other socket (the parser copies what it keeps),
    so every connection of a loop can read into the same memory, and idle connections hold
    none (uvloop keeps one 256 kB buffer per loop the same way)."""
    view: memoryview | None = getattr(_buffers, "view", None)
    if view is None or len(view) != size:
        view = memoryview(bytearray(size))
        _buffers.view = view
    return view


class _BodyAsParsed(HttpToolsProtocol):
    """uvicorn's protocol, but a body piece that finds no earlier one waiting is handed over
    as the parser made it: uvicorn would append it to a ``bytearray`` and copy that into
    ``bytes`` again when the app receives it (``bytes(b)`` of a ``bytes`` is ``b`` itself)."""

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if cycle.body or cycle.response_complete or self.parser.should_upgrade():
            super().on_body(body)  # a second piece before the app took the first, or no app
            return
        # uvicorn declares a ``bytearray``; it only appends to it, measures it and hands
        # ``bytes(...)`` of it on, all of which a ``bytes`` supports.
        cycle.body = body  # type: ignore[assignment]
        if len(body) > HIGH_WATER_LIMIT:
            self.flow.pause_reading()
        cycle.message_event.set()


class LargeReads(asyncio.BufferedProtocol):
    """One connection: reads of up to ``read_bytes`` into this thread's buffer, parsed at once
    by the wrapped uvicorn protocol (which owns the transport, its flow control and the
    request cycles). Build it with ``protocol_class``."""

    read_bytes = 1024 * 1024

    def __init__(self, **uvicorn_arguments: Any) -> None:
        self._http = _BodyAsParsed(**uvicorn_arguments)
        self._view = read_buffer(self.read_bytes)

    def get_buffer(self, sizehint: int) -> memoryview:
        self._view = read_buffer(self.read_bytes)
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        # The parser reads the buffer and copies what it keeps before this returns (uvicorn's
        # ``data_received`` only feeds it), so the next read may overwrite it.
        self._http.data_received(self._view[:nbytes])  # type: ignore[arg-type]

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._http.connection_made(cast(asyncio.Transport, transport))  # a socket's, always

    def connection_lost(self, exc: Exception | None) -> None:
        self._http.connection_lost(exc)

    def eof_received(self) -> bool | None:
        self._http.eof_received()
        return None

    def pause_writing(self) -> None:
        self._http.pause_writing()

    def resume_writing(self) -> None:
        self._http.resume_writing()


def protocol_class(read_bytes: int) -> type[asyncio.Protocol]:
    """The class to give ``uvicorn.Config(http=...)``: connections reading ``read_bytes`` at a
    time. (uvicorn types it as an ``asyncio.Protocol``; it only calls it with its keyword
    arguments, and asyncio's and uvloop's transports take a ``BufferedProtocol`` as well.)"""
    size = read_bytes

    class Reading(LargeReads):
        read_bytes = size

    return cast(type[asyncio.Protocol], Reading)
