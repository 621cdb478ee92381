"""Open WebSocket connections per session, so that a session's end closes them. No I/O of its
own: a connection registers an ``asyncio.Event`` that its bridge waits on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator


class Connections:
    def __init__(self) -> None:
        self._open: dict[str, set[asyncio.Event]] = {}

    @contextlib.contextmanager
    def opened(self, session_id: str) -> Iterator[asyncio.Event]:
        """Register one connection for the time of the block; the event is set when the
        session ends."""
        ended = asyncio.Event()
        self._open.setdefault(session_id, set()).add(ended)
        try:
            yield ended
        finally:
            left = self._open.get(session_id)
            if left is not None:
                left.discard(ended)
                if not left:
                    del self._open[session_id]

    def end(self, session_id: str) -> int:
        """Tell every open connection of the session to close; how many."""
        events = self._open.pop(session_id, set())
        for ended in events:
            ended.set()
        return len(events)

    def count(self, session_id: str | None = None) -> int:
        if session_id is not None:
            return len(self._open.get(session_id, ()))
        return sum(len(s) for s in self._open.values())
