"""Connections to apps kept alive between requests, per app address, and the turns fresh ones
take (``services.appproxy.upstream`` is one connection). No subjects.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

from services.appproxy.upstream import ConnectFailed, Exchange

MAX_IDLE_PER_APP = 32
IDLE_S = 4.0
"""A kept connection unused this long is closed rather than reused (apps time them out too)."""
OPENING_PER_APP = 8
OPENING_HOLD_S = 0.02
"""At most ``OPENING_PER_APP`` fresh connections to one app between their connect and the
first byte of their answer (or ``OPENING_HOLD_S``, whichever comes first): a burst of new
connections beyond what the app's accept queue holds would have SYNs dropped, and a dropped
SYN is sent again only after a second (busybox ``httpd`` listens with a backlog of 9)."""


@dataclass
class _Opening:
    """Fresh connections to one app now opening, and the connects waiting for a turn."""

    count: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)


class Pool:
    """Connections to apps, kept alive between requests when the app allows it."""

    def __init__(self, *, connect_timeout_s: float) -> None:
        self._connect_timeout_s = connect_timeout_s
        self._idle: dict[tuple[str, int], list[Exchange]] = {}
        self._opening: dict[tuple[str, int], _Opening] = {}

    def kept(self, key: tuple[str, int]) -> Exchange | None:
        """A kept connection to the app, if one is open and fresh enough."""
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            exchange = idle.pop()
            if not exchange.closed and now - exchange.idle_since < IDLE_S:
                return exchange
            exchange.abort()
        return None

    async def connect(self, key: tuple[str, int]) -> Exchange:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                await self._turn(key)
                try:
                    _, exchange = await loop.create_connection(
                        lambda: Exchange(key, self), key[0], key[1]
                    )
                except BaseException:
                    self._opened(key)
                    raise
        except (OSError, TimeoutError) as exc:
            raise ConnectFailed(f"cannot connect to the app: {exc!r}") from None
        exchange.opening = lambda: self._opened(key)
        loop.call_later(OPENING_HOLD_S, exchange.opened)
        return exchange

    async def _turn(self, key: tuple[str, int]) -> None:
        """Wait until fewer than ``OPENING_PER_APP`` connections to the app are opening."""
        opening = self._opening.setdefault(key, _Opening())
        if opening.count < OPENING_PER_APP:
            opening.count += 1
            return
        turn = asyncio.get_running_loop().create_future()
        opening.waiting.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._opened(key)  # given a turn just as it gave up: pass it on
            raise

    def _opened(self, key: tuple[str, int]) -> None:
        """One connection no longer opening: its turn goes to the next waiting, if any."""
        opening = self._opening[key]
        while opening.waiting:
            turn = opening.waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        opening.count -= 1
        if opening.count == 0:
            del self._opening[key]

    def release(self, exchange: Exchange) -> None:
        """Keep the connection for the next request, or close it."""
        exchange.active = False
        idle = self._idle.get(exchange.key, ())
        if not exchange.reusable or len(idle) >= MAX_IDLE_PER_APP:
            exchange.abort()
            return
        exchange.idle_since = time.monotonic()
        self._idle.setdefault(exchange.key, []).append(exchange)

    def forget(self, exchange: Exchange) -> None:
        """A connection closed: it is no longer kept."""
        idle = self._idle.get(exchange.key)
        if idle is not None and exchange in idle:
            idle.remove(exchange)
            if not idle:
                del self._idle[exchange.key]

    def close(self) -> None:
        for idle in self._idle.values():
            for exchange in idle:
                exchange.abort()
        self._idle.clear()
