"""Plain HTTP through the proxy on the wire: an app written here on bare asyncio streams, so
that what it sends (chunked, delimited by its close, cut short, kept alive) and what it gets
(the exact request head and body) are the test's to choose and see. The proxy runs on the real
nats-server with its routes from the log, as in ``test_appproxy.py``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpx
import pytest

from events.bus import Bus
from events.store import EventStore
from schemas.app_tokens import COOKIE
from services.appproxy import pool as upstream_pool
from tests.integration.appproxy_support import ALICE, FakeSession, running_proxy, token

BIG = bytes(range(256)) * 800  # 200 KiB: past what the proxy reads whole


@dataclass
class WireApp:
    """What the app saw: connections accepted, request heads and bodies, and whether the
    endless answer's connection was closed."""

    connections: int = 0
    heads: list[bytes] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    endless_closed: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                body = await _body(reader, head)
                self.heads.append(head)
                self.bodies.append(body)
                if not await self.answer(head, body, writer):
                    break
        writer.close()

    async def answer(self, head: bytes, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """Write the answer the path asks for; whether the connection stays open."""
        method, target = head.split(b" ", 2)[:2]
        path = target.split(b"?", 1)[0]
        if path == b"/keep":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        elif path == b"/echo":
            writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: %d\r\n"
                         b"Connection: X-Secret\r\nX-Secret: 1\r\nX-Kept: 1\r\n\r\n%b"
                         % (len(body), body))  # fmt: skip
        elif path == b"/chunked":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(BIG), 7000):
                piece = BIG[i : i + 7000]
                writer.write(b"%x\r\n%b\r\n" % (len(piece), piece))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        elif path == b"/close":
            writer.write(b"HTTP/1.0 200 OK\r\n\r\n" + BIG)
            await writer.drain()
            return False
        elif path == b"/cut":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
            await writer.drain()
            return False
        elif path == b"/cut-big":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 500000\r\n\r\n" + BIG[:1000])
            await writer.drain()
            return False
        elif path == b"/head" and method == b"HEAD":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nX-Head: yes\r\n\r\n")
        elif path == b"/endless":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            try:
                while True:
                    writer.write(b"5\r\ntick\n\r\n")
                    await writer.drain()
                    await asyncio.sleep(0.01)
            except ConnectionError:
                self.endless_closed.set()
                return False
        elif path == b"/garbage":
            writer.write(b"this is not HTTP at all\r\n\r\n")
            return False
        else:
            writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        return True


async def _body(reader: asyncio.StreamReader, head: bytes) -> bytes:
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        parts = []
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
        await reader.readexactly(2)
        return b"".join(parts)
    for line in lower.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return await reader.readexactly(int(line.split(b":")[1]))
    return b""


@dataclass
class Proxied:
    app: WireApp
    client: httpx.AsyncClient
    prefix: str
    cookie: str


@pytest.fixture
async def proxied(bus: Bus) -> AsyncIterator[Proxied]:
    app = WireApp()
    server = await asyncio.start_server(app.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", port, False)])
    async with running_proxy(bus) as (proxy, base), httpx.AsyncClient(base_url=base) as client:
        await proxy.sync()
        prefix = f"/apps/{session.id}/web"
        opened = await client.get(f"{prefix}/?token={token(session.id, 'web', ALICE)}")
        assert opened.status_code == 303, opened.text
        cookie = opened.cookies[COOKIE]
        client.cookies.clear()
        client.cookies.set(COOKIE, cookie)
        yield Proxied(app, client, prefix, cookie)
    server.close()
    await server.wait_closed()


async def test_a_kept_alive_app_connection_serves_the_next_requests(proxied: Proxied) -> None:
    for _ in range(5):
        answer = await proxied.client.get(f"{proxied.prefix}/keep")
        assert (answer.status_code, answer.content) == (200, b"ok")
    assert proxied.app.connections == 1


async def test_small_posts_take_the_kept_connection_and_large_ones_a_fresh_one(
    proxied: Proxied,
) -> None:
    # A body of at most 64 KiB is read whole first, so its request may go on the kept
    # connection (and be sent again should that one turn out closed): five POSTs, one
    # connection. A larger one streams as it arrives, on a connection of its own.
    for i in range(5):
        answer = await proxied.client.post(f"{proxied.prefix}/echo", content=b"x" * (i * 16_000))
        assert (answer.status_code, len(answer.content)) == (201, i * 16_000)
    assert proxied.app.connections == 1
    assert proxied.app.bodies[-1] == b"x" * 64_000
    large = await proxied.client.post(f"{proxied.prefix}/echo", content=BIG)
    assert (large.status_code, large.content) == (201, BIG)
    assert proxied.app.connections == 2


async def test_the_request_reaches_the_app_cleaned_and_the_answer_comes_back_cleaned(
    proxied: Proxied,
) -> None:
    answer = await proxied.client.post(
        f"{proxied.prefix}/echo?a=1&b=%2F", content=b"payload",
        headers={"Connection": "keep-alive, X-Drop", "X-Drop": "1", "X-Mine": "2",
                 "X-Forwarded-For": "6.6.6.6",
                 "Cookie": f"{COOKIE}={proxied.cookie}; other=3"},
    )  # fmt: skip
    assert (answer.status_code, answer.content) == (201, b"payload")
    assert "x-secret" not in answer.headers and answer.headers["x-kept"] == "1"
    head = proxied.app.heads[-1].decode().lower()
    request_line, *lines = head.split("\r\n")
    assert request_line == "post /echo?a=1&b=%2f http/1.1"  # the prefix gone
    assert "x-mine: 2" in lines and "x-drop: 1" not in lines
    assert "x-forwarded-for: 127.0.0.1" in lines and "6.6.6.6" not in head
    assert f"x-forwarded-prefix: {proxied.prefix.lower()}" in lines
    assert COOKIE not in head and "cookie: other=3" in lines


async def test_a_chunked_request_body_arrives_whole(proxied: Proxied) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(BIG), 10_000):
            yield BIG[i : i + 10_000]

    answer = await proxied.client.post(f"{proxied.prefix}/echo", content=pieces())
    assert answer.status_code == 201
    assert answer.content == BIG and proxied.app.bodies[-1] == BIG
    assert b"transfer-encoding: chunked" in proxied.app.heads[-1].lower()


@pytest.mark.parametrize("path", ["/chunked", "/close"])
async def test_long_answers_are_streamed_whole_however_the_app_frames_them(
    proxied: Proxied, path: str
) -> None:
    async with proxied.client.stream("GET", proxied.prefix + path) as answer:
        assert answer.status_code == 200
        got = b"".join([chunk async for chunk in answer.aiter_bytes()])
    assert got == BIG
    # And the proxy's connection to the client is still good.
    again = await proxied.client.get(f"{proxied.prefix}/keep")
    assert again.content == b"ok"


async def test_an_answer_to_head_has_its_headers_and_no_body(proxied: Proxied) -> None:
    answer = await proxied.client.head(f"{proxied.prefix}/head")
    assert answer.status_code == 200
    assert answer.headers["x-head"] == "yes" and answer.headers["content-length"] == "1234"
    assert answer.content == b""
    assert (await proxied.client.get(f"{proxied.prefix}/keep")).content == b"ok"


async def test_an_app_that_breaks_off_or_speaks_no_http_is_a_502_or_a_cut_answer(
    proxied: Proxied,
) -> None:
    short = await proxied.client.get(f"{proxied.prefix}/cut")
    assert short.status_code == 502
    garbage = await proxied.client.get(f"{proxied.prefix}/garbage")
    assert garbage.status_code == 502
    with pytest.raises(httpx.HTTPError):  # streamed already: the client sees it cut
        await proxied.client.get(f"{proxied.prefix}/cut-big")
    assert (await proxied.client.get(f"{proxied.prefix}/keep")).content == b"ok"


async def test_a_client_that_goes_away_closes_the_apps_connection(proxied: Proxied) -> None:
    async with proxied.client.stream("GET", f"{proxied.prefix}/endless") as answer:
        async for chunk in answer.aiter_bytes():
            assert b"tick" in chunk
            break
    await asyncio.wait_for(proxied.app.endless_closed.wait(), timeout=10)


async def test_an_app_that_is_not_listening_is_a_502(bus: Bus) -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    session = FakeSession(EventStore(bus))
    await session.start(ALICE, [("web", port, True)])
    async with running_proxy(bus) as (proxy, base), httpx.AsyncClient(base_url=base) as client:
        await proxy.sync()
        answer = await client.get(f"/apps/{session.id}/web/")
    assert answer.status_code == 502
    assert "does not answer" in answer.text


async def test_at_most_a_few_fresh_connections_to_an_app_are_opening_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst of new connections is let through as earlier ones get their first answer byte
    (an app's accept queue would drop the SYNs past it); one that gives up waiting passes its
    turn on."""
    monkeypatch.setattr(upstream_pool, "OPENING_HOLD_S", 60.0)  # only an answer ends opening here
    writers: list[asyncio.StreamWriter] = []
    all_in = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        if len(writers) == upstream_pool.OPENING_PER_APP:
            all_in.set()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    key = ("127.0.0.1", server.sockets[0].getsockname()[1])
    pool = upstream_pool.Pool(connect_timeout_s=5)
    opened = [await pool.connect(key) for _ in range(upstream_pool.OPENING_PER_APP)]
    for exchange in opened:
        exchange.begin(head_only=False)
    waiting = asyncio.create_task(pool.connect(key))
    given_up = asyncio.create_task(pool.connect(key))
    await asyncio.sleep(0.3)
    assert not waiting.done() and not given_up.done()

    given_up.cancel()
    await asyncio.wait_for(all_in.wait(), 5)
    writers[0].write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")  # the first answers
    ninth = await asyncio.wait_for(waiting, 5)
    assert opened[0].received and ninth.opening is not None
    for exchange in [*opened, ninth]:
        exchange.abort()
    server.close()
    await server.wait_closed()
