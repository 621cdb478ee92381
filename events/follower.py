"""Following the log in the background: a ``Fold`` polled in a task of its own, and ``sync()``
for the services that must answer "everything stored before this call is folded" (reads what
the fold reads, ``ev.>`` or its filters; writes nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Generic

from events.cancelling import cancelling
from events.fold import Fold, S
from events.store import EventStore

log = logging.getLogger(__name__)


class Follower(Generic[S]):
    """Follows the log with a ``Fold`` in a background task and answers ``sync()``: "return
    once everything stored before this call is folded". Services that decide on folded state
    (scheduler, the tenancy service) ask it before saying "unknown" to a sender who may
    have just written what makes the answer "known"."""

    def __init__(
        self, fold: Fold[S], store: EventStore, *, poll_timeout_s: float, retry_after_s: float
    ) -> None:
        self.fold = fold
        self._store = store
        self._poll_timeout_s = poll_timeout_s
        self._retry_after_s = retry_after_s
        self._task: asyncio.Task[None] | None = None
        self._polled = asyncio.Condition()
        self._polls_started = 0
        self._last_poll = (0, False)  # (poll number, found nothing)

    def start(self, name: str) -> None:
        self._task = asyncio.create_task(self._follow(), name=name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _follow(self) -> None:
        state = self.fold.state
        while not cancelling():
            self._polls_started += 1
            number, before = self._polls_started, state.position
            try:
                await self.fold.poll(self._poll_timeout_s)
                empty = state.position == before
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                # The tail recreates its consumer itself; this is a lost connection.
                log.warning("reading the log failed (%r); trying again", exc)
                empty = False
                await asyncio.sleep(self._retry_after_s)
            async with self._polled:
                self._last_poll = (number, empty)
                self._polled.notify_all()

    async def sync(self, timeout: float = 10.0) -> None:
        """Return once the position passed the log's end as read now, or a read that began
        after that found nothing more for us."""
        target = await self._store.stream_last_seq()
        began_after = self._polls_started
        state = self.fold.state

        def synced() -> bool:
            number, empty = self._last_poll
            return state.position >= target or (number > began_after and empty)

        async with self._polled:
            await asyncio.wait_for(self._polled.wait_for(synced), timeout)
