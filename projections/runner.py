"""The projector: keeps the views equal to the log, one transaction per fetched batch.

Reads ``ev.>`` through ``Tail`` (events no view reads are skipped by their header, undecoded),
from the lowest stored position + 1, up to 256 at a time. Each batch is applied to every view
together with the views' new positions in ONE transaction, so a crash between fetch and commit,
or the same batch delivered again, changes nothing: events at or below a view's stored position
are skipped, and each row's last seq makes ``apply`` idempotent as well.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from events.bus import Bus
from events.envelope import StoredEvent
from events.store import EventStore, decode
from events.tail import Tail
from projections.base import (
    Position,
    View,
    advance_positions,
    positions_metadata,
    read_positions,
    write_position,
)
from projections.containment import Containment
from projections.db import writing
from projections.views import VIEWS

log = logging.getLogger(__name__)

OUTAGE = (OperationalError, InterfaceError, OSError, ConnectionError)
"""The database being away: waited out by ``run``, never taken for a poisoned event."""


async def create_tables(
    engine: AsyncEngine, views: Sequence[View] = VIEWS, suffix: str = ""
) -> None:
    """Create what is missing (no migration tool yet: a changed view gets a new version and is
    rebuilt into new tables). Readers may call it at start too, before any projector ran."""
    async with writing(engine) as conn:
        await conn.run_sync(positions_metadata.create_all)
        for view in views:
            await conn.run_sync(view.metadata(suffix).create_all)


class ViewVersionError(RuntimeError):
    """The stored view was built by other code (another view version): rebuild it first."""


class _Rewound(Exception):
    """A view's stored position moved behind this projector (a rebuild was swapped in)."""


class Projector:
    def __init__(
        self,
        engine: AsyncEngine,
        bus: Bus,
        views: Sequence[View] = VIEWS,
        *,
        suffix: str = "",
        batch: int = 256,
    ) -> None:
        self._engine = engine
        self._bus = bus
        self._views = tuple(views)
        self._suffix = suffix
        self._batch = batch
        self._store = EventStore(bus)
        # The views' events, and operators' corrections (which say what to read past).
        self._names = frozenset({"EventSkipped", "AggregateVoided"}).union(
            *(v.events for v in self._views)
        )
        self._positions: dict[str, int] = {}
        self._tail: Tail | None = None
        self._advanced = asyncio.Condition()
        self.consumer = f"projections{suffix}"
        self._contain = Containment(bus, self.consumer)

    def key(self, view: View) -> str:
        """The view's row in ``projection_positions`` (a shadow's carries its suffix)."""
        return f"{view.name}{self._suffix}"

    @property
    def position(self) -> int:
        """The last stream sequence every view has committed (0 before ``start``)."""
        return min(self._positions.values(), default=0)

    @property
    def positions(self) -> dict[str, int]:
        return dict(self._positions)

    async def start(self) -> int:
        """Create missing tables and position rows, then open the tail after the positions."""
        await create_tables(self._engine, self._views, self._suffix)
        async with writing(self._engine) as conn:
            stored = await read_positions(conn, map(self.key, self._views), lock=True)
            for view in self._views:
                if self.key(view) not in stored:
                    await write_position(conn, self.key(view), view.version, 0)
        await self._contain.load()
        await self._sync()
        return self.position

    async def _stored(self, conn: AsyncConnection, *, lock: bool = False) -> dict[str, int]:
        """Each view's stored position; refuses a view stored by another version."""
        return self._checked(await read_positions(conn, map(self.key, self._views), lock=lock))

    def _checked(self, stored: dict[str, Position]) -> dict[str, int]:
        out: dict[str, int] = {}
        for view in self._views:
            held = stored.get(self.key(view), Position(view.version, 0))
            if held.version != view.version:
                raise ViewVersionError(
                    f"view {view.name} is v{held.version} in the database and "
                    f"v{view.version} in this code: run `jetyard projections rebuild`"
                )
            out[view.name] = held.seq
        return out

    async def _sync(self) -> None:
        """Take the stored positions as the truth and (re)open the tail after them: a rebuild
        may have swapped in views that lie behind what this projector had read."""
        async with self._engine.connect() as conn:
            self._positions = await self._stored(conn)
        if self._tail is not None and self._tail.position > self.position:
            log.warning("views were swapped in at seq %d; reading again from there", self.position)
            await self._tail.close()
            self._tail = None
        if self._tail is None:
            self._tail = Tail(
                self._bus, from_seq=self.position + 1, batch=self._batch, names=self._names
            )

    async def step(self, timeout: float = 1.0) -> int:
        """Fetch the next batch and commit it; returns how many events were applied."""
        if self._tail is None:
            await self.start()
        assert self._tail is not None
        after = self._tail.position
        events = self._contain.decoded(await self._tail.fetch_raw(timeout))
        if self._tail.position == after:
            await self._sync()  # idle: the moment to notice a swap nothing else would show
            return 0
        position = self._tail.position
        try:
            # Even a batch the name filter emptied is committed: the position says how far
            # the views have read, which is what "caught up" and read-your-writes ask.
            applied = await self.apply_batch(events, position, after=after)
            await self._settle()
            return applied
        except _Rewound:
            await self._sync()
            return 0
        except OUTAGE:
            raise
        except Exception as exc:
            log.warning("a batch after seq %d failed (%r): applying it event by event", after, exc)
        return await self._one_by_one(events, position, after)

    async def _one_by_one(self, events: Sequence[StoredEvent], position: int, after: int) -> int:
        """Apply a failed batch one event per transaction: the event that fails is
        quarantined and skipped (with the rest of its aggregate), the others go in."""
        applied = 0
        for event in events:
            if event.envelope.subject in self._contain.held:
                continue
            try:
                applied += await self.apply_batch([event], event.seq)
            except OUTAGE:
                raise
            except Exception as exc:
                self._contain.poison(event.seq, event.envelope.subject, event.name, exc)
                await self.apply_batch([], event.seq)
        await self.apply_batch([], position)
        await self._settle()
        return applied

    async def _settle(self) -> None:
        """Read corrected aggregates into the views again, then record and release."""
        for subject in list(self._contain.reapply):
            del self._contain.reapply[subject]
            await self._reapply(subject)
        await self._contain.flush()

    async def _reapply(self, subject: str) -> None:
        """A held aggregate an operator corrected: its events (less the skipped ones) up to
        the views' position go through the views again; rows take only what they lack."""
        contain = self._contain
        contain.held.discard(subject)
        messages = await self._store.reader.read_subject(subject)
        try:
            events = [
                decode(m)
                for m in messages
                if m.seq <= self.position and not contain.corrected.skips(subject, m.seq)
            ]
            async with writing(self._engine) as conn:
                for view in self._views:
                    mine = [e for e in events if e.name in view.events]
                    if mine:
                        await view.apply_batch(conn, self._suffix, mine)
        except OUTAGE:
            raise
        except Exception as exc:
            contain.poison(messages[-1].seq if messages else 0, subject, "", exc)
            return
        contain.corrected.resolved[subject] = None

    async def apply_batch(
        self, events: Sequence[StoredEvent], position: int, *, after: int | None = None
    ) -> int:
        """Apply ``events`` (in stream order, covering the log up to ``position``) and store
        the new positions, in one transaction. ``after`` is where the batch starts; if a view
        is stored behind it the batch would leave a gap, so nothing is applied. Without
        ``after`` the caller vouches that there is no gap (e.g. a batch delivered again)."""
        applied: set[int] = set()  # an event two views read is one event applied
        async with writing(self._engine) as conn:
            # Locking the position rows first serialises this with a rebuild's swap.
            stored = await read_positions(conn, map(self.key, self._views), lock=True)
            held = self._checked(stored)
            if after is not None and min(held.values()) < after:
                raise _Rewound
            advanced: list[str] = []
            for view in self._views:
                seen = held[view.name]
                mine = [e for e in events if e.seq > seen and e.name in view.events]
                if mine:
                    await view.apply_batch(conn, self._suffix, mine)
                    applied.update(e.seq for e in mine)
                if position > seen:
                    key = self.key(view)
                    if key in stored:
                        advanced.append(key)
                    else:
                        await write_position(conn, key, view.version, position)
            if advanced:
                await advance_positions(conn, advanced, position)
        async with self._advanced:
            self._positions = {name: max(seq, position) for name, seq in held.items()}
            self._advanced.notify_all()
        return len(applied)

    async def caught_up(self) -> bool:
        """Whether every view has read the log as far as it reaches now (for ``/healthz``)."""
        return self.position >= await self._store.stream_last_seq()

    async def catch_up(self, timeout: float = 1.0) -> int:
        """Apply everything up to the log's end as read now; returns that sequence."""
        target = await self._store.stream_last_seq()
        if self._tail is None:
            await self.start()
        else:
            await self._sync()
        while self.position < target:
            await self.step(timeout)
        return target

    async def wait_for(self, seq: int, timeout: float) -> bool:
        """Read-your-writes: wait until every view holds the event at ``seq`` (needs ``run``)."""
        try:
            async with asyncio.timeout(timeout), self._advanced:
                await self._advanced.wait_for(lambda: self.position >= seq)
        except TimeoutError:
            return False
        return True

    async def run(self, stop: asyncio.Event, timeout: float = 1.0) -> None:
        """Follow the log until ``stop`` is set. A database outage is waited out: a batch whose
        commit failed left the tail ahead of the stored positions, which the next batch sees
        (as after a swap) and reads again from there."""
        delay = 0.1
        while not stop.is_set():
            try:
                await self.step(timeout)
                delay = 0.1
            except (DBAPIError, OSError) as exc:
                log.warning("views database unavailable (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)

    async def close(self) -> None:
        if self._tail is not None:
            await self._tail.close()
            self._tail = None
