"""Bodies through the proxy (``services.appproxy.forward``): the client's request body written
to the app as it arrives (re-chunked when it came chunked), and the app's answer passed on as it
comes, its connection closed when the client goes away. No subjects.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.types import Receive, Send

from services.appproxy.upstream import Exchange, UpstreamError

log = logging.getLogger(__name__)


async def stream(exchange: Exchange, send: Send, receive: Receive) -> None:
    """Pass the answer on as it comes; a client that goes away closes the app's connection."""
    gone = asyncio.ensure_future(disconnected(receive))

    def went(task: asyncio.Future[None]) -> None:
        if not task.cancelled() and task.exception() is None:
            exchange.abort()

    gone.add_done_callback(went)
    try:
        while (data := await exchange.read()) is not None:
            await send({"type": "http.response.body", "body": data, "more_body": True})
    except UpstreamError as exc:
        # Left incomplete: the server closes the client's connection, which tells it.
        log.info("appproxy: an answer broke off: %s", exc)
        return
    finally:
        gone.remove_done_callback(went)
        gone.cancel()
    await send({"type": "http.response.body", "body": b""})


async def disconnected(receive: Receive) -> None:
    """Return when the client has gone (what is left of a request body is skipped)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def send_body(exchange: Exchange, receive: Receive, *, chunked: bool) -> None:
    """The client's request body, as it arrives (re-chunked when it came chunked)."""
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            raise UpstreamError("the client went away while sending its request")
        data, more = message.get("body", b""), message.get("more_body", False)
        try:
            if chunked:
                if data:
                    exchange.send(b"%x\r\n%b\r\n" % (len(data), data))
                if not more:
                    exchange.send(b"0\r\n\r\n")
            elif data:
                exchange.send(data)
            await exchange.drain()
        except UpstreamError:
            if exchange.received:
                return  # the app answered before taking all of it: pass its answer on
            raise
