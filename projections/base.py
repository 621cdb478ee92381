"""What a view is (its tables, the events it reads, a batch apply) and where each view's
stream position lives (``projection_positions``). Reads and writes no subjects itself."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError
from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import UnknownEventError
from events.envelope import StoredEvent

log = logging.getLogger(__name__)

BatchApply = Callable[[AsyncConnection, str, Sequence[StoredEvent]], Awaitable[None]]
"""Apply events (in stream order, each newer than the view's position) to the view's tables
named with ``suffix``, inside the caller's transaction."""

UNDECODABLE = (ValidationError, UnknownEventError)
"""Events a view cannot read. The writers validate every event, so this is a bug elsewhere;
a view skips such an event (with an error in the log) rather than stop every view for good."""

SHADOW_MARK = "__r"
"""Tables of a view being rebuilt are named ``<table>__r<8 hex>`` until they are swapped in."""


@dataclass(frozen=True, slots=True)
class View:
    name: str
    version: int
    """Bumped when the tables or the meaning of the rows change: the view must be rebuilt."""
    events: frozenset[str]
    metadata: Callable[[str], MetaData]
    """The view's tables, with ``suffix`` appended to every table and index name."""
    apply_batch: BatchApply

    def table_names(self, suffix: str = "") -> list[str]:
        return [t.name for t in self.metadata(suffix).sorted_tables]


class UnreadableEventError(Exception):
    """A view cannot read an event: the projector quarantines it and holds its aggregate."""


def skip_undecodable(view: str, event: StoredEvent, exc: Exception) -> None:
    """Not skipped silently any more: the batch fails, and the projector, applying it again
    one event at a time, quarantines this one (its aggregate held) and goes on."""
    raise UnreadableEventError(f"view {view} cannot read {event.name}: {exc}") from exc


positions_metadata = MetaData()
positions = Table(
    "projection_positions",
    positions_metadata,
    # A live view is keyed by its name; a shadow being rebuilt by its name and suffix.
    Column("view", String(128), primary_key=True),
    Column("version", Integer, nullable=False),
    Column("position", BigInteger, nullable=False),
)


@dataclass(frozen=True, slots=True)
class Position:
    version: int
    seq: int


async def read_positions(
    conn: AsyncConnection, keys: Iterable[str], *, lock: bool = False
) -> dict[str, Position]:
    """The stored positions of ``keys`` (missing keys are absent). ``lock`` holds the rows
    until the transaction ends, which serialises a projector with a rebuild's swap."""
    query = select(positions).where(positions.c.view.in_(list(keys)))
    if lock:
        query = query.with_for_update()
    rows = (await conn.execute(query)).all()
    return {row.view: Position(row.version, row.position) for row in rows}


async def advance_positions(conn: AsyncConnection, keys: list[str], seq: int) -> None:
    """Move the stored positions of ``keys`` (rows that exist, at their versions) to ``seq``:
    one statement, however many views a batch advances."""
    await conn.execute(positions.update().where(positions.c.view.in_(keys)).values(position=seq))


async def write_position(conn: AsyncConnection, key: str, version: int, seq: int) -> None:
    result = await conn.execute(
        positions.update().where(positions.c.view == key).values(version=version, position=seq)
    )
    if result.rowcount == 0:
        await conn.execute(positions.insert().values(view=key, version=version, position=seq))
