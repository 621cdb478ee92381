"""A real nats-server for tests and a connection with Jetyard's streams declared: what the
session's shared server (``tests/conftest.py``) and a module's own one are made of."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from events.bus import Bus, connect, ensure_streams
from jetyard.runtime.natsserver import NatsServer
from schemas.settings import NatsSettings


@contextlib.contextmanager
def nats_server_in(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    server = NatsServer(data_dir=Path(tmp_path_factory.mktemp("nats"))).start()
    try:
        yield server
    finally:
        server.stop()


def settings_of(server: NatsServer) -> NatsSettings:
    return NatsSettings(url=server.url, request_timeout_s=5.0)


@contextlib.asynccontextmanager
async def bus_with_streams(settings: NatsSettings, name: str) -> AsyncIterator[Bus]:
    connected = await connect(settings, name=name)
    await ensure_streams(connected)
    try:
        yield connected
    finally:
        await connected.close()
