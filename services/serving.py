"""Running a service's HTTP server (uvicorn) inside the service's own event loop: entered only
once it listens, stopped and awaited on the way out. Shared by the services that serve HTTP
beside their work on the log (gateway, storage, app proxy, the agent's terminals); it knows
nothing of any of them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import uvicorn

STARTING_POLL_S = 0.02


@contextlib.asynccontextmanager
async def listening(server: uvicorn.Server, what: str) -> AsyncIterator[asyncio.Task[None]]:
    """Serve for the time of the block, which is entered once ``server`` listens (so a
    readiness said inside it is true); raises if it could not start. Yields the serving task,
    done if the server stops by itself."""
    task = asyncio.create_task(server.serve(), name=what)
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
