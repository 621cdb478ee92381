"""Fixtures shared by the integration tests (the ``bus`` fixture is in ``tests/conftest.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from nats.js.errors import NotFoundError

from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM
from services.scheduler.service import Scheduler
from services.scheduler.settings import SchedulerSettings

StartScheduler = Callable[..., Awaitable[Scheduler]]


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
        durable=f"scheduler-test-{new_id()[:8]}", poll_timeout_s=0.25, command_fetch_timeout_s=0.2
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
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(COMMANDS_STREAM, settings.durable)
