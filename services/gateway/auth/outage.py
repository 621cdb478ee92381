"""A moment's memory that the log was out of reach, for the gateway's per-request lookups
(logins, nonces, rate limits): after one lookup timed out or met no leader, the next requests
use their fallback at once for ``hold_s`` instead of each waiting out a timeout, then the log
is asked again. Reads and writes no subjects."""

from __future__ import annotations

import time
from collections.abc import Callable


class Outage:
    def __init__(self, hold_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._hold_s = hold_s
        self._clock = clock
        self._until = 0.0

    def seen(self) -> None:
        """A lookup just failed for want of the log."""
        self._until = self._clock() + self._hold_s

    @property
    def ongoing(self) -> bool:
        return self._clock() < self._until
