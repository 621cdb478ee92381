"""Fixtures shared by the integration tests (the ``bus`` fixture is in ``tests/conftest.py``),
and the check that every test module leaves the shared server and loop as it found them."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from nats.js.errors import NotFoundError
from sqlalchemy import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from events.bus import Bus, connect, ensure_streams
from events.store import EventStore
from jetyard.runtime.natsserver import NatsServer
from projections.db import create_engine, normalise_url
from schemas.ids import new_id
from schemas.settings import NatsSettings
from schemas.subjects import COMMANDS_STREAM, EVENTS_STREAM
from services.scheduler.service import Scheduler, nodes_durable
from services.scheduler.settings import SchedulerSettings
from tests.integration.leftovers import consumer_names, running_tasks, tasks_left

StartScheduler = Callable[..., Awaitable[Scheduler]]


PG_ADMIN = os.environ.get("JETYARD_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(params=["sqlite", "postgresql"])
async def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh views database, once on SQLite and once on PostgreSQL (a database of its own,
    dropped afterwards)."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'views.db'}"
        return
    # CREATE / DROP DATABASE cannot run inside a transaction.
    admin = create_async_engine(normalise_url(PG_ADMIN), isolation_level="AUTOCOMMIT")
    name = f"jy_views_{uuid.uuid4().hex[:12]}"
    try:
        async with admin.connect() as conn:
            await conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except (OSError, DBAPIError) as exc:
        await admin.dispose()
        # The README and CI promise PostgreSQL: its absence is a broken set-up, not a pass.
        pytest.fail(f"no PostgreSQL at {PG_ADMIN} (set JETYARD_TEST_POSTGRES): {exc}")
    try:
        yield make_url(normalise_url(PG_ADMIN)).set(database=name).render_as_string(False)
    finally:
        async with admin.connect() as conn:
            await conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.dispose()


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture(scope="module", autouse=True)
async def leaves_nothing_behind(bus: Bus) -> AsyncIterator[None]:
    """Fail the module whose tests leave a command consumer, a reader of the log or a task
    behind: the next module, in whatever order, would find it."""
    commands = await consumer_names(bus, COMMANDS_STREAM)
    readers = await consumer_names(bus, EVENTS_STREAM)
    tasks = running_tasks()
    yield
    left = {
        COMMANDS_STREAM: await consumer_names(bus, COMMANDS_STREAM) - commands,
        EVENTS_STREAM: await consumer_names(bus, EVENTS_STREAM) - readers,
        "tasks": set(await tasks_left(tasks)),
    }
    assert not any(left.values()), f"left behind: {left}"


@pytest.fixture
def store(bus: Bus) -> EventStore:
    return EventStore(bus)


@pytest.fixture
def image() -> str:
    """An image no other test's agents have: placement only uses nodes whose agent has it."""
    return f"img-{new_id()[:8]}"


@pytest.fixture
async def start_scheduler(bus: Bus) -> AsyncIterator[StartScheduler]:
    """Schedulers (replicas) sharing one fresh durable consumer, removed afterwards: on a
    work-queue stream only one consumer may hold ``cmd.session.*`` at a time."""
    settings = SchedulerSettings(
        durable=f"scheduler-test-{new_id()[:8]}",
        poll_timeout_s=0.25,
        command_fetch_timeout_s=0.2,
        # Hand-written agents never beat: node loss is tested where they do (test_node_loss).
        watch_heartbeats=False,
    )
    running: list[Scheduler] = []

    async def start(**overrides: Any) -> Scheduler:
        scheduler = Scheduler(bus, settings.model_copy(update=overrides))
        await scheduler.start()
        running.append(scheduler)
        return scheduler

    try:
        yield start
    finally:
        for scheduler in running:
            await scheduler.stop()
        for durable in (settings.durable, nodes_durable(settings.durable)):
            with contextlib.suppress(NotFoundError):
                await bus.js.delete_consumer(COMMANDS_STREAM, durable)


@pytest.fixture
async def own_server(tmp_path: Path) -> AsyncIterator[NatsSettings]:
    """A nats-server for this run alone, its streams declared."""
    server = NatsServer(data_dir=tmp_path / "nats").start()
    try:
        settings = NatsSettings(url=server.url, request_timeout_s=10.0)
        bus = await connect(settings, name="replicas-setup")
        await ensure_streams(bus)
        await bus.close()
        yield settings
    finally:
        server.stop()
