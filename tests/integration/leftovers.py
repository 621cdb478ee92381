"""What a test leaves behind on the shared nats-server and the shared event loop: the
consumers of a stream, the tasks still running. Tests share one server and one loop, so a
leftover durable on the ``JY_COMMANDS`` work queue (where one consumer per filter is allowed)
or a reader still following the log breaks a later test, in whatever order they run."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Set

from nats.js.api import ConsumerInfo

from events.bus import Bus

PAGE = 256  # the server's page size for consumer lists
ATTEMPTS = 4


async def consumer_names(bus: Bus, stream: str) -> set[str]:
    names: set[str] = set()
    while True:
        page = await _page(bus, stream, len(names))
        names.update(info.name for info in page)
        if len(page) < PAGE:
            return names


async def _page(bus: Bus, stream: str, offset: int) -> list[ConsumerInfo]:
    """One page of the list, asked again when the server does not answer in time: on a
    machine busy tearing down an end-to-end stack the first ask may wait past the timeout."""
    for _ in range(ATTEMPTS - 1):
        with contextlib.suppress(TimeoutError):  # nats-py raises its own subclass
            return await bus.js.consumers_info(stream, offset=offset)
    return await bus.js.consumers_info(stream, offset=offset)


def running_tasks() -> set[asyncio.Task[object]]:
    return {task for task in asyncio.all_tasks() if not task.done()}


async def tasks_left(before: Set[asyncio.Task[object]]) -> list[str]:
    """Tasks started since ``before`` that still run, once the loop has had a moment to finish
    what was cancelled (a cancelled task ends at its next step)."""
    for _ in range(20):
        await asyncio.sleep(0.01)
        left = running_tasks() - before - {asyncio.current_task()}
        if not left:
            return []
    return sorted(f"{task.get_name()}: {task.get_coro()!r}" for task in left)


def subscriptions(bus: Bus) -> int:
    """The connection's subscriptions (nats-py keeps no public count)."""
    return len(bus.nc._subs)
