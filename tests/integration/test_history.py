"""``projections.history.History`` on a log of its own (sessions requested, then cancelled,
two events each): the views at a position hold exactly the events up to it; answers start from
the nearest snapshot below, so each projects at most ``snapshot_every`` events; snapshots thin
out evenly past ``keep_snapshots``; snapshots of views this code no longer writes are dropped
and the answer is built afresh; a position off the log is refused; closing gives up a build
under way and leaves no file of it."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.audit_log import write_log
from events.bus import Bus
from jetyard.runtime.natsserver import NatsServer
from projections.history import BuildStoppedError, History, PositionError
from projections.queries import count_sessions
from schemas.session import SessionStatus
from tests.nats_support import bus_with_streams, settings_of

EVENTS = 120


@pytest.fixture(scope="module")
async def log(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Bus]:
    server = NatsServer(data_dir=Path(tmp_path_factory.mktemp("history")) / "nats").start()
    try:
        async with bus_with_streams(settings_of(server), "history") as bus:
            assert await write_log(bus, EVENTS) == EVENTS
            yield bus
    finally:
        server.stop()


def open_files(root: Path) -> list[Path]:
    return list(root.glob("at-*"))


async def counts(history: History, position: int) -> tuple[int, int]:
    """(sessions, of them cancelled) in the views at ``position``."""
    engine = await history.views_at(position)
    every = await count_sessions(engine)
    return every, await count_sessions(engine, status=SessionStatus.CANCELLED)


async def test_each_position_holds_the_events_up_to_it_from_the_nearest_snapshot(
    log: Bus, tmp_path: Path
) -> None:
    history = History(log, tmp_path, snapshot_every=10, keep_snapshots=100, keep_open=2)
    try:
        assert await counts(history, EVENTS) == (EVENTS // 2, EVENTS // 2)
        assert history.snapshots == list(range(10, EVENTS + 1, 10))
        for position in (0, 1, 2, 37, 58, 99):
            before = history.projected
            # Requested at odd positions, cancelled at the even ones after.
            assert await counts(history, position) == ((position + 1) // 2, position // 2)
            assert history.projected - before <= 10  # from the snapshot below
    finally:
        await history.close()
    assert not open_files(tmp_path)  # open positions are removed on close


async def test_snapshots_thin_out_evenly_past_the_limit(log: Bus, tmp_path: Path) -> None:
    history = History(log, tmp_path, snapshot_every=10, keep_snapshots=4)
    try:
        await history.views_at(EVENTS)
        kept = history.snapshots
        assert len(kept) == 4 and kept[0] == 10
        gaps = [b - a for a, b in itertools.pairwise(kept)]
        assert max(gaps) <= 2 * min(gaps) + 10, kept
    finally:
        await history.close()


async def test_snapshots_of_other_views_are_dropped_and_the_answer_built_afresh(
    log: Bus, tmp_path: Path
) -> None:
    first = History(log, tmp_path, snapshot_every=50)
    await first.views_at(EVENTS)
    await first.close()
    for snapshot in (tmp_path / "snapshots").glob("*.db"):
        with sqlite3.connect(snapshot) as db:
            db.execute("UPDATE projection_positions SET version = version + 100")
    again = History(log, tmp_path, snapshot_every=50)
    try:
        assert await counts(again, 75) == (38, 37)
        assert again.projected == 75  # from the start: the old snapshots were not used
        assert again.snapshots == [50]
    finally:
        await again.close()


async def test_a_position_off_the_log_is_refused(log: Bus, tmp_path: Path) -> None:
    history = History(log, tmp_path)
    try:
        for position in (-1, EVENTS + 1):
            with pytest.raises(PositionError, match=f"position {position} is not on the log"):
                await history.views_at(position)
    finally:
        await history.close()


async def test_a_build_is_given_up_when_the_history_closes(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    server = NatsServer(data_dir=Path(tmp_path_factory.mktemp("long")) / "nats").start()
    try:
        async with bus_with_streams(settings_of(server), "history-long") as bus:
            end = await write_log(bus, 5_000)
            history = History(bus, tmp_path, batch=1)  # one event a fetch: a slow build
            building = asyncio.create_task(history.views_at(end))
            while history.projected == 0:  # noqa: ASYNC110 (a count the build thread moves)
                await asyncio.sleep(0.001)
            await history.close()
            with pytest.raises(BuildStoppedError, match=f"position {end} was stopped"):
                await building
            assert history.projected < end
    finally:
        server.stop()
    assert not open_files(tmp_path)  # the unfinished file is gone


async def test_what_a_killed_build_left_is_cleared_at_start(log: Bus, tmp_path: Path) -> None:
    (tmp_path / "snapshots").mkdir()
    left = [tmp_path / "at-7-abcd.db", tmp_path / "at-7-abcd.db-wal"]
    left.append(tmp_path / "snapshots" / "000000000050-abcd.part")
    for path in left:
        path.write_bytes(b"half")
    history = History(log, tmp_path, snapshot_every=50)
    try:
        assert not any(path.exists() for path in left)
        assert await counts(history, 60) == (30, 30)  # and it builds as if they never were
    finally:
        await history.close()
