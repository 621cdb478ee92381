"""Docker's timestamped log stream turned into ``OutputLine``s. Pure text handling; reads and
writes no subjects.

With ``timestamps=true`` the engine starts every log line with its time in RFC 3339 with
nanoseconds (``2024-05-01T12:34:56.123456789Z text``); chunks of the stream need not end at a
line's end, so lines are cut from what has arrived. The time becomes integer nanoseconds:
compared as text, RFC 3339 strings with trimmed zeros sort wrongly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime

from events.declarations import OUTPUT_LINE_BYTES
from services.node.backend import OutputLine


def engine_ns(stamp: str) -> int:
    """``2024-05-01T12:34:56.123456789Z`` (any number of fraction digits, ``Z`` or an offset)
    as nanoseconds since the epoch. Raises ``ValueError`` for anything else."""
    base, dot, rest = stamp.partition(".")
    digits = ""
    if dot:
        digits = rest[: len(rest) - len(rest.lstrip("0123456789"))]
        base += rest[len(digits) :]
        if not digits:
            raise ValueError(f"no fraction digits in {stamp!r}")
    moment = datetime.fromisoformat(base)
    if moment.tzinfo is None:
        raise ValueError(f"no time zone in {stamp!r}")
    return int(moment.timestamp()) * 1_000_000_000 + int(digits[:9].ljust(9, "0") or "0")


def cut(text: str) -> str:
    """A line no longer than ``OUTPUT_LINE_BYTES`` of UTF-8 (a cut character is dropped)."""
    data = text.encode()
    return (
        text if len(data) <= OUTPUT_LINE_BYTES else data[:OUTPUT_LINE_BYTES].decode(errors="ignore")
    )


def stamped_line(raw: str, previous_ns: int) -> OutputLine:
    """One ``<time> <text>`` line; one without a readable time keeps the previous line's."""
    stamp, _, text = raw.partition(" ")
    try:
        return OutputLine(cut(text.removesuffix("\r")), engine_ns(stamp))
    except ValueError:
        return OutputLine(cut(raw.removesuffix("\r")), previous_ns)


async def stamped_lines(chunks: AsyncIterator[str]) -> AsyncIterator[OutputLine]:
    """The lines of a timestamped log stream, as they complete; a last unfinished one at the
    end of the stream too."""
    pending = ""
    at_ns = 0
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split("\n")
        for raw in lines:
            line = stamped_line(raw, at_ns)
            at_ns = line.at_ns
            yield line
    if pending:
        yield stamped_line(pending, at_ns)
