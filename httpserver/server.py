"""Running an HTTP server (uvicorn) inside a service's own event loop: entered only once it
listens, stopped and awaited on the way out. Shared by the services that serve HTTP beside
their work on the log (gateway, storage, app proxy, the agent's terminals) and by the
``/metrics`` listener of those that do not (``httpserver.metrics``, which the projections use
too); it knows nothing of any of them. No subjects."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator

import uvicorn

STARTING_POLL_S = 0.02


def bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (not listening yet: uvicorn does that), for a
    server that must not exit the process when a port cannot be had, as uvicorn's own binding
    does; ``OSError`` if it cannot."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


@contextlib.asynccontextmanager
async def listening(
    server: uvicorn.Server, what: str, sockets: list[socket.socket] | None = None
) -> AsyncIterator[asyncio.Task[None]]:
    """Serve for the time of the block (on ``sockets`` when given, else where the server's
    config says), which is entered once ``server`` listens (so a readiness said inside it is
    true); raises if it could not start. Yields the serving task, done if the server stops by
    itself."""
    task = asyncio.create_task(server.serve(sockets=sockets), name=what)
    try:
        while not server.started:
            if task.done():
                task.result()
                config = server.config
                raise RuntimeError(f"{what} did not start on {config.host}:{config.port}")
            await asyncio.sleep(STARTING_POLL_S)
        yield task
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def serve_until(server: uvicorn.Server, stop: asyncio.Event, what: str) -> None:
    """Serve until ``stop`` is set (or the server stops by itself); ready (the first look at
    ``stop``) only once listening."""
    async with listening(server, what) as serving:
        stopping = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
