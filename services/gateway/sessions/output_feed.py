"""Kernels' live output read from ``JY_OUTPUT`` (``output.<session id>.<kernel id>``, written by
the agents, ``services.node.output``) through an ephemeral ordered pull consumer, never a core
subscription. Reads ``JY_OUTPUT`` and the session's events (to see it end); writes nothing.

Each message carries the number of its first line, so a reader asks from any line (``since``)
and sees where the stream's cap dropped lines it asked for: the count comes with the next
lines it gets (``OutputChunk.dropped``), and the text forms say it in a marker line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from events.bus import Bus
from events.direct import RawMessage
from events.store import EventStore
from events.tail import Tail
from events.writes import AggregateRef
from schemas.session import TERMINAL_STATUSES
from schemas.subjects import (
    OUTPUT_LINE_HEADER,
    OUTPUT_STREAM,
    AggregateType,
    outputs_of,
)
from services.gateway.sessions.status_feed import STATUS_OF

IDLE_S = 1.0  # how long a live reader waits for lines before it looks whether the session ended


@dataclass(frozen=True, slots=True)
class OutputChunk:
    kernel_id: str
    line: int
    """The number (0-based) of ``lines[0]`` in the kernel's output."""
    lines: tuple[str, ...]
    dropped: int
    """Lines asked for, before ``line``, that the output cap had dropped already."""


def dropped_marker(count: int) -> str:
    return f"[jetyard: {count} earlier lines dropped: the output cap keeps the latest]"


class OutputReader:
    """One session's (or one kernel's) output in stream order, from line ``since`` of each
    kernel, read through an ``events.tail.Tail`` on ``JY_OUTPUT``."""

    def __init__(
        self, bus: Bus, session_id: str, kernel_id: str | None = None, since: int = 0
    ) -> None:
        self._tail = Tail(bus, subjects=[outputs_of(session_id, kernel_id)], stream=OUTPUT_STREAM)
        self._since = since
        self._next: dict[str, int] = {}  # kernel id -> next line wanted

    @property
    def pending(self) -> int:
        """Messages the consumer holds beyond the last delivered one (-1: not opened yet)."""
        return self._tail.pending

    async def fetch(self, timeout: float) -> list[OutputChunk]:
        """The next messages' lines (those from ``since`` on); [] if none came in ``timeout``."""
        chunks = (self._chunk(message) for message in await self._tail.fetch_raw(timeout))
        return [chunk for chunk in chunks if chunk is not None]

    def _chunk(self, message: RawMessage) -> OutputChunk | None:
        kernel_id = message.subject.rsplit(".", 1)[1]
        first = int(message.headers.get(OUTPUT_LINE_HEADER, "0"))
        lines = message.data.decode(errors="replace").split("\n")[:-1]
        wanted = self._next.get(kernel_id, self._since)
        if first + len(lines) <= wanted:
            return None
        skip = max(0, wanted - first)
        self._next[kernel_id] = first + len(lines)
        return OutputChunk(kernel_id, first + skip, tuple(lines[skip:]), max(0, first - wanted))

    async def caught_up(self) -> list[OutputChunk]:
        """Everything in the stream now (from ``since``), without waiting for more."""
        chunks = await self.fetch(1.0)
        while self.pending != 0:
            chunks += await self.fetch(1.0)
        return chunks

    async def close(self) -> None:
        await self._tail.close()


async def session_ended(bus: Bus, session_id: str) -> bool:
    history = await EventStore(bus).read(AggregateRef(AggregateType.SESSION, session_id))
    return any(STATUS_OF.get(e.name) in TERMINAL_STATUSES for e in history.events)


async def live_output(
    bus: Bus, session_id: str, kernel_id: str | None = None, since: int = 0
) -> AsyncIterator[OutputChunk]:
    """The output from line ``since`` on, then each new batch of lines, until the session has
    ended and all its output is delivered. The agent publishes a kernel's last lines before it
    reports the exit, so once the end is on the log the stream holds everything."""
    reader = OutputReader(bus, session_id, kernel_id, since)
    try:
        while True:
            chunks = await reader.fetch(IDLE_S)
            for chunk in chunks:
                yield chunk
            if reader.pending == 0 and await session_ended(bus, session_id):
                for chunk in await reader.caught_up():
                    yield chunk
                return
    finally:
        await reader.close()


async def output_so_far(bus: Bus, session_id: str, kernel_id: str) -> str | None:
    """A kernel's output in the stream now, a marker line first if the cap dropped its head;
    None if it has none there."""
    reader = OutputReader(bus, session_id, kernel_id)
    try:
        chunks = await reader.caught_up()
    finally:
        await reader.close()
    if not chunks:
        return None
    lines = [dropped_marker(chunks[0].dropped)] if chunks[0].dropped else []
    lines += [line for chunk in chunks for line in chunk.lines]
    return "".join(f"{line}\n" for line in lines)
