"""The data plane's HTTP connections (``large_reads``): requests fed as a socket would, through
a transport that records what it is asked, to a small ASGI app; no sockets."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from services.storage.large_reads import protocol_class, read_buffer

READ = 256 * 1024
MiB = 1024 * 1024


class Transport(asyncio.Transport):
    """What a connection's protocol is handed: records writes and read pauses."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.paused = False
        self.pauses = 0
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 6021), "peername": ("127.0.0.1", 50000)}.get(
            name, default
        )

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def pause_reading(self) -> None:
        self.paused, self.pauses = True, self.pauses + 1

    def resume_reading(self) -> None:
        self.paused = False

    def is_reading(self) -> bool:
        return not self.paused

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class App:
    """Keeps each request's body pieces; answers 200 with the body's length."""

    def __init__(self) -> None:
        self.bodies: list[list[bytes]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        pieces: list[bytes] = []
        self.bodies.append(pieces)
        more = True
        while more:
            message = await receive()
            if message["body"]:
                pieces.append(message["body"])
            more = message.get("more_body", False)
        size = str(sum(len(piece) for piece in pieces)).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": size})


def connect(app: App) -> tuple[asyncio.BufferedProtocol, Transport]:
    config = uvicorn.Config(app, http=protocol_class(READ), lifespan="off", log_level="error")
    config.load()
    build: Any = config.http_protocol_class  # called as uvicorn's server calls it
    made = build(config=config, server_state=ServerState(), app_state={})
    assert isinstance(made, asyncio.BufferedProtocol)  # what asyncio and uvloop look for
    transport = Transport()
    made.connection_made(transport)
    return made, transport


def feed(connection: asyncio.BufferedProtocol, data: bytes) -> None:
    """``data`` as socket reads: each at most what the buffer offered holds."""
    while data:
        buffer = memoryview(connection.get_buffer(-1))
        size = min(len(buffer), len(data))
        buffer[:size] = data[:size]
        connection.buffer_updated(size)
        data = data[size:]


async def settle(transport: Transport, answers: int) -> None:
    for _ in range(1000):
        if transport.written.count(b"HTTP/1.1 ") >= answers:
            return
        await asyncio.sleep(0)
        if transport.paused:
            transport.resume_reading()  # the app asked for more (uvicorn resumes this way)
    raise AssertionError(f"{answers} answers expected, got {bytes(transport.written)!r}")


async def test_a_large_body_reaches_the_app_whole_in_read_sized_bytes() -> None:
    app = App()
    connection, transport = connect(app)
    body = bytes(range(256)) * (3 * MiB // 256)
    head = f"PATCH /u HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    request = head + body
    for start in range(0, len(request), READ):  # a read at a time; the app takes each piece
        feed(connection, request[start : start + READ])
        for _ in range(5):
            await asyncio.sleep(0)
    await settle(transport, 1)
    (pieces,) = app.bodies
    assert b"".join(pieces) == body
    assert all(type(piece) is bytes for piece in pieces)
    assert max(len(piece) for piece in pieces) > 64 * 1024  # whole reads, not 64 KiB slices
    assert transport.pauses > 0  # flow control still holds the socket while the app is busy
    assert f"\r\n{len(body)}\r\n".encode() in transport.written


async def test_pieces_the_app_has_not_taken_yet_are_joined_in_order() -> None:
    app = App()
    connection, transport = connect(app)
    body = b"a" * 100 + b"b" * 100 + b"c" * 100
    head = f"PUT /u HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    feed(connection, head)
    for piece in (body[:100], body[100:200], body[200:]):  # three reads before the app runs
        feed(connection, piece)
    await settle(transport, 1)
    assert b"".join(app.bodies[0]) == body


async def test_requests_in_one_read_and_a_chunked_body_are_all_answered() -> None:
    app = App()
    connection, transport = connect(app)
    chunked = b"PATCH /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunked += b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    feed(connection, b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n" + chunked)
    await settle(transport, 2)
    assert [b"".join(pieces) for pieces in app.bodies] == [b"", b"hello world"]
    assert transport.written.count(b"HTTP/1.1 200 OK") == 2


async def test_a_malformed_request_is_refused_as_uvicorn_does() -> None:
    connection, transport = connect(App())
    feed(connection, b"NOT HTTP AT ALL\r\n\r\n")
    assert transport.written.startswith(b"HTTP/1.1 400 Bad Request")
    assert transport.closed


async def test_connections_of_one_thread_share_one_buffer_and_threads_do_not() -> None:
    # In a running loop, as the server makes connections (uvicorn's protocol asks for it).
    first, second = connect(App())[0], connect(App())[0]
    assert first.get_buffer(-1) is second.get_buffer(-1)
    assert len(memoryview(first.get_buffer(-1))) == READ
    elsewhere: list[memoryview] = []
    worker = threading.Thread(target=lambda: elsewhere.append(read_buffer(READ)))
    worker.start()
    worker.join()
    assert elsewhere[0] is not read_buffer(READ)
    assert len(read_buffer(2 * READ)) == 2 * READ  # another size: a buffer of that size
