"""Measuring folders after they changed, at most once per folder per interval: the data plane
says a folder changed (an upload completed, a mkdir, move or delete) and a session that
mounted a folder read-write ended; bursts of changes coalesce into one measurement. What a
measurement writes (``VFolderUsageMeasured``) is the service's: ``measure`` is handed in."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Measure = Callable[[str, bool], Awaitable[None]]
"""Measure folder ``id`` (walking its tree again first, ``True``, for backends that keep
usage and cannot see what a session wrote through its mount)."""


class UsageMeter:
    def __init__(self, measure: Measure, interval_s: float) -> None:
        self._measure = measure
        self._interval_s = interval_s
        self._due: dict[str, bool] = {}
        """Folder id -> whether to recount: waiting for the next round."""
        self._wake = asyncio.Event()
        self.rounds = 0

    def touch(self, folder_id: str, *, recount: bool = False) -> None:
        """Measure ``folder_id`` in the next round (called in the event loop)."""
        self._due[folder_id] = self._due.get(folder_id, False) or recount
        self._wake.set()

    async def run(self) -> None:
        """Measure what was touched, round after round, a pause of ``interval_s`` between
        rounds: a folder touched many times in one interval is measured once."""
        while True:
            await self._wake.wait()
            self._wake.clear()
            due, self._due = self._due, {}
            for folder_id, recount in due.items():
                try:
                    await self._measure(folder_id, recount)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("storage: measuring folder %s failed", folder_id)
            self.rounds += 1
            await asyncio.sleep(self._interval_s)
