"""The views as they were at a log position: the log projected from its start (or from the
nearest snapshot below) into a SQLite file of their own, read with the same queries as the
live views. What ``asOf`` answers from (the gateway, ``services/gateway/core/history.py``).

A position is built once and kept open (the ``keep_open`` most recently asked); on the way to
it, each multiple of ``snapshot_every`` passed is copied aside as a snapshot (SQLite's backup
API: a consistent copy of a file in WAL mode). An answer at position P then projects at most
``snapshot_every`` events, from the largest snapshot at or below P, whatever the log's length;
the first answer beyond every snapshot projects from the last one (from the start on a new
gateway). At most ``keep_snapshots`` snapshots are kept: past that, the one closest to its
neighbour below goes, so they thin out evenly over the log.

A build runs in a thread of its own, with its own event loop and NATS connection, so that a
long one (minutes, over a long log with no snapshot yet) leaves the caller's loop free to
serve: the gateway keeps answering while an auditor's first ``asOf`` is built. The file it
leaves is then opened on the caller's loop.

Differences from the live views, said where they matter: an event that cannot be decoded, or
that a view cannot apply, is passed over here (the live projector quarantines its aggregate
until an operator corrects it), and operators' corrections are not replayed.

Reads ``ev.>`` (the views' events); writes only its own files under ``root``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus, connect
from events.direct import RawMessage
from events.envelope import StoredEvent
from events.store import EventStore, decode
from events.tail import Tail
from projections.db import create_engine
from projections.runner import OUTAGE, Projector, ViewVersionError
from projections.views import VIEWS

log = logging.getLogger(__name__)

SNAPSHOT_EVERY = 50_000
KEEP_SNAPSHOTS = 40
KEEP_OPEN = 4
BATCH = 1024


class PositionError(ValueError):
    """A position the log does not hold (negative, or past its end)."""


class BuildStoppedError(RuntimeError):
    """A build given up: its asker was cancelled, or the history closed."""


class History:
    def __init__(
        self,
        bus: Bus,
        root: Path,
        *,
        snapshot_every: int = SNAPSHOT_EVERY,
        keep_snapshots: int = KEEP_SNAPSHOTS,
        keep_open: int = KEEP_OPEN,
        batch: int = BATCH,
    ) -> None:
        if snapshot_every < 1 or keep_open < 1 or keep_snapshots < 0:
            raise ValueError("snapshot_every and keep_open are 1 or more, keep_snapshots 0 or more")
        self._bus = bus
        self._store = EventStore(bus)
        self._root = root
        self._snapshot_dir = root / "snapshots"
        self._every = snapshot_every
        self._keep_snapshots = keep_snapshots
        self._keep_open = keep_open
        self._batch = batch
        self._names = frozenset().union(*(view.events for view in VIEWS))
        self._open: OrderedDict[int, tuple[AsyncEngine, Path]] = OrderedDict()
        self._building = asyncio.Lock()  # one build at a time: each is CPU-bound
        self._stops: set[threading.Event] = set()
        # A stopped process's open positions and half-made snapshots.
        for left in [*root.glob("at-*.db*"), *self._snapshot_dir.glob("*.part")]:
            left.unlink(missing_ok=True)
        self.projected = 0
        """Events projected by every build so far (what the snapshots save shows here)."""

    @property
    def snapshots(self) -> list[int]:
        """The positions snapshots are kept at, in order."""
        if not self._snapshot_dir.is_dir():
            return []
        return sorted(int(p.stem) for p in self._snapshot_dir.glob("*.db") if p.stem.isdigit())

    async def end(self) -> int:
        """The log's last position now."""
        return await self._store.stream_last_seq()

    async def views_at(self, position: int) -> AsyncEngine:
        """An engine over the views as they were once the event at ``position`` was applied
        (0: before the first event). Valid until ``keep_open`` other positions were asked
        for since, or ``close``."""
        async with self._building:
            kept = self._open.get(position)
            if kept is not None:  # checked when it was built: no need to ask the log again
                self._open.move_to_end(position)
                return kept[0]
            end = await self.end()
            if not 0 <= position <= end:
                raise PositionError(f"position {position} is not on the log (it holds 1 to {end})")
            stop = threading.Event()
            self._stops.add(stop)
            try:
                path = await asyncio.to_thread(asyncio.run, self._build_apart(position, stop))
            finally:
                # Cancelled (the asker left, the gateway stops): the build ends at its next
                # batch and removes its file, rather than running on for minutes unasked.
                stop.set()
                self._stops.discard(stop)
            engine = create_engine(f"sqlite:///{path}")
            self._open[position] = (engine, path)
            while len(self._open) > self._keep_open:
                _, (old, old_path) = self._open.popitem(last=False)
                await old.dispose()
                _remove(old_path)
            return engine

    async def _build_apart(self, position: int, stop: threading.Event) -> Path:
        """``_build`` on this thread's own loop and connection."""
        bus = await connect(self._bus.settings, name="history")
        try:
            return await self._build(bus, position, stop)
        finally:
            await bus.close()

    async def _build(self, bus: Bus, position: int, stop: threading.Event) -> Path:
        self._root.mkdir(parents=True, exist_ok=True)
        path = self._root / f"at-{position}-{secrets.token_hex(4)}.db"
        base = max((s for s in self.snapshots if s <= position), default=0)
        if base:
            _copy(self._snapshot_path(base), path)
        engine = create_engine(f"sqlite:///{path}")
        try:
            projector = Projector(engine, bus, VIEWS)
            try:
                await projector.start()  # tables and positions (a snapshot's are there)
            except ViewVersionError:
                # Snapshots of views this code no longer writes: every one goes.
                log.warning("history: snapshots of older views dropped; building afresh")
                await engine.dispose()
                _remove(path)
                for old in self.snapshots:
                    _remove(self._snapshot_path(old))
                return await self._build(bus, position, stop)
            await projector.close()  # its tail is not used: the reads below stop at position
            await self._project(bus, projector, path, base, position, stop)
        except BaseException:
            await engine.dispose()
            _remove(path)
            raise
        await engine.dispose()
        log.info("views at position %d built (from %s)", position, base or "the start")
        return path

    async def _project(
        self,
        bus: Bus,
        projector: Projector,
        path: Path,
        base: int,
        position: int,
        stop: threading.Event,
    ) -> None:
        """Apply the events after ``base`` up to ``position``, stopping at each snapshot
        boundary on the way to copy the file aside."""
        tail = Tail(bus, from_seq=base + 1, batch=self._batch, names=self._names)
        at = base
        try:
            while at < position:
                if stop.is_set():
                    raise BuildStoppedError(f"the build of position {position} was stopped")
                before = tail.position
                raw = await tail.fetch_raw(timeout=1.0)
                if tail.position == before:
                    if tail.pending == 0:
                        break  # nothing stored beyond: the rest of the range was removed
                    continue
                events = [e for e in map(_decoded, raw) if e is not None and e.seq <= position]
                reached = min(tail.position, position)
                for boundary in range(self._next_boundary(at), reached + 1, self._every):
                    await self._apply(projector, [e for e in events if e.seq <= boundary], boundary)
                    events = [e for e in events if e.seq > boundary]
                    self._snapshot(path, boundary)
                await self._apply(projector, events, reached)
                at = reached
            await projector.apply_batch([], position)
        finally:
            await tail.close()

    def _next_boundary(self, at: int) -> int:
        return (at // self._every + 1) * self._every

    async def _apply(self, projector: Projector, events: Sequence[StoredEvent], to: int) -> None:
        self.projected += len(events)
        try:
            await projector.apply_batch(events, to)
            return
        except OUTAGE:
            raise
        except Exception as exc:
            log.warning("history: a batch up to %d failed (%r): event by event", to, exc)
        for event in events:
            try:
                await projector.apply_batch([event], event.seq)
            except OUTAGE:
                raise
            except Exception as exc:
                log.warning("history: seq %d (%s) passed over: %r", event.seq, event.name, exc)
        await projector.apply_batch([], to)

    def _snapshot_path(self, position: int) -> Path:
        return self._snapshot_dir / f"{position:012d}.db"

    def _snapshot(self, path: Path, position: int) -> None:
        if self._keep_snapshots == 0 or self._snapshot_path(position).exists():
            return
        self._snapshot_dir.mkdir(parents=True, exist_ok=True)
        part = self._snapshot_dir / f"{position:012d}-{secrets.token_hex(4)}.part"
        _copy(path, part)  # on the build's own thread already
        part.replace(self._snapshot_path(position))  # whole or absent, never half a copy
        kept = self.snapshots
        while len(kept) > self._keep_snapshots:
            # The one nearest its neighbour below goes: the rest stay spread over the log.
            _, gone = min((kept[i] - kept[i - 1], kept[i]) for i in range(1, len(kept)))
            _remove(self._snapshot_path(gone))
            kept.remove(gone)

    async def close(self) -> None:
        for stop in list(self._stops):
            stop.set()
        async with self._building:
            for engine, path in self._open.values():
                await engine.dispose()
                _remove(path)
            self._open.clear()


def _decoded(message: RawMessage) -> StoredEvent | None:
    try:
        return decode(message)
    except Exception as exc:  # not an envelope, misfiled: the live views quarantine it
        log.debug("history: passed over an undecodable event: %r", exc)
        return None


def _copy(source: Path, target: Path) -> None:
    """A consistent copy of a SQLite file (its WAL included), through the backup API."""
    with (
        contextlib.closing(sqlite3.connect(source)) as src,
        contextlib.closing(sqlite3.connect(target)) as dst,
    ):
        src.backup(dst)


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").unlink()
