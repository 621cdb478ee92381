"""One plain HTTP request relayed to an upstream address and its answer passed back, for both
kinds of route the proxy serves (a session's app, ``forward.py``; an endpoint's replica,
``endpoints/forward.py``): the request head as the upstream gets it (``headers.py``'s rules),
the request written on a kept connection or a fresh one (``pool.py``, ``upstream.py``), the
body sent as it arrives and the answer passed on whole when it says it is small, streamed
otherwise (``bodies.py``). Who may pass and where to is the callers'. No subjects.
"""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from services.appproxy import bodies, headers
from services.appproxy.pool import Pool
from services.appproxy.upstream import Exchange, Head, UpstreamError

FRAMING = frozenset({b"content-length"})
"""Left out of ``headers.to_app``'s: the head says how the body is framed itself."""
WHOLE_BODY_BYTES = 64 * 1024
"""An answer that says it is no longer is read whole and sent in one piece; longer or unsized
ones are streamed."""
NO_BODY = frozenset({204, 304})

Framing = str | None
"""How a request's body is framed to the upstream: ``"length"``, ``"chunked"``, or None (no
body)."""


def address_key(upstream: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as the pool keys it."""
    host, _, port = upstream.rpartition(":")
    return host.strip("[]"), int(port)


SMALL_BODY_BYTES = 64 * 1024
"""A request body that says it is no longer is read whole before the request is sent: the
request may then go on a kept connection (and be sent again on a fresh one if that turns out
closed, or to another replica). Without this every POST opened a connection of its own (a new
TCP handshake, and a new thread in a threaded server): ~40 % of the throughput lost."""


async def small_body(scope: Scope, receive: Receive) -> bytes | None:
    """The whole request body, read now, when its ``content-length`` says it is at most
    ``SMALL_BODY_BYTES``; None when it is larger, chunked or absent (then it is streamed as it
    arrives). ``UpstreamError`` when the client goes away before it is all there."""
    length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
    chunked = any(k == b"transfer-encoding" for k, _ in scope["headers"])
    if chunked or length is None or not length.isdigit() or int(length) > SMALL_BODY_BYTES:
        return None
    parts, more = [], int(length) > 0
    while more:
        message = await receive()
        if message["type"] != "http.request":
            raise UpstreamError("the client went away while sending its request")
        parts.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(parts)


def request_head(
    scope: Scope, upstream: str, prefix: str, query: str | None,
    drop: frozenset[bytes] = FRAMING, whole: bytes | None = None,
) -> tuple[bytes, Framing]:  # fmt: skip
    """The request head for the upstream (``prefix`` stripped from the path, ``drop``: header
    names left out besides ``headers.to_app``'s), and how its body is framed. With ``whole``
    (``small_body``'s), the request is the head and that body, and nothing is left to frame."""
    length: bytes | None = None
    chunked = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            length = value
        elif name == b"transfer-encoding":
            chunked = chunked or b"chunked" in value.lower()
    target = headers.target(scope, prefix, query)
    lines = [b"%b %b HTTP/1.1\r\nhost: %b\r\n" % (scope["method"].encode(), target,
                                                 upstream.encode())]  # fmt: skip
    lines += [b"%b: %b\r\n" % header for header in headers.to_app(scope, prefix, drop | FRAMING)]
    body: Framing = None
    if whole is not None:
        lines.append(b"content-length: %d\r\n\r\n%b" % (len(whole), whole))
        return b"".join(lines), None
    if chunked:
        lines.append(b"transfer-encoding: chunked\r\n")
        body = "chunked"
    elif length is not None and length != b"0":
        lines.append(b"content-length: %b\r\n" % length)
        body = "length"
    elif length is not None:
        lines.append(b"content-length: 0\r\n")
    lines.append(b"\r\n")
    return b"".join(lines), body


class Relay:
    """The listener's connections to upstreams (one ``Pool``) and what is done with them."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool

    async def exchange(
        self, key: tuple[str, int], request: bytes, body: Framing, receive: Receive,
        head_only: bool,
    ) -> Exchange:  # fmt: skip
        """The request written on a kept connection, or a fresh one if the kept one turns
        out closed before answering anything (a request whose body is still to come, ``body``
        not None, always takes a fresh one: it could not be sent twice; one whose small body
        ``small_body`` read is whole in ``request`` and may be). Kept connections are closed
        after ``pool.IDLE_S``, before apps close theirs, so that race is rare. A fresh
        connection that cannot be opened raises ``ConnectFailed``: nothing was sent, and no
        byte of the client's body was read, so the caller may send it elsewhere."""
        kept = self.pool.kept(key) if body is None else None
        if kept is not None:
            kept.begin(head_only=head_only)
            try:
                kept.send(request)
                await kept.head()
                return kept
            except UpstreamError:
                if kept.received:
                    raise
                kept.abort()
        exchange = await self.pool.connect(key)
        exchange.begin(head_only=head_only)
        exchange.send(request)
        if body is not None:
            try:
                await bodies.send_body(exchange, receive, chunked=body == "chunked")
            except BaseException:
                exchange.abort()
                raise
        return exchange

    async def answer(
        self, exchange: Exchange, head: Head, send: Send, receive: Receive, head_only: bool
    ) -> bool:
        """Pass the answer on (whole when small, streamed otherwise); False when the upstream
        broke off before a small answer was read (nothing was sent: the caller answers)."""
        answer = headers.to_client(head.headers)
        small = head_only or head.status in NO_BODY or (
            head.length is not None and head.length <= WHOLE_BODY_BYTES
        )  # fmt: skip
        if small:
            try:
                body = await exchange.read_all()
            except UpstreamError:
                return False
            start = {"type": "http.response.start", "status": head.status, "headers": answer}
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return True
        await send({"type": "http.response.start", "status": head.status, "headers": answer})
        await bodies.stream(exchange, send, receive)
        return True


async def plain(send: Send, status: int, text: str, *more: tuple[bytes, bytes]) -> None:
    """A short text answer from the proxy itself (``more``: extra headers)."""
    body = text.encode() + b"\n"
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                    (b"content-length", str(len(body)).encode()), *more],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": body})
