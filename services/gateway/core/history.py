"""``asOf``: the state of a moment of the past, for administrators and auditors. The queries
that take it (sessions, nodes, folders, the tenancy) read their usual views and directory,
only as they were at a log position: the views projected up to it
(``projections.history``, with snapshots), the tenancy directory folded up to it. A time is
taken as the position of the last event stored at or before it.

The caller's own rights are today's (what they may read is decided as for any query); the
records they read are the past's. Reads ``ev.>``; writes only the history's own files.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import strawberry
from strawberry.types import Info

from commands.authorisation import LOG_READERS, Principal
from commands.directory import TENANCY_SUBJECTS, Directory
from events.bus import Bus
from events.direct import DirectReader
from events.store import decode
from events.tail import Tail
from projections.history import History, PositionError
from schemas.subjects import EVENTS_STREAM, events_of
from services.gateway.context import Context, ctx_of, forbidden, invalid, who
from services.gateway.core.views import SqlViews, Views

if TYPE_CHECKING:
    from services.gateway.settings import GatewaySettings

log = logging.getLogger(__name__)

KEEP_DIRECTORIES = 4
MAX_MOMENTS = 2


@strawberry.input(
    description="A moment of the past: a time (the last event stored at or before it) or a "
    "log position (the event there applied). Exactly one. For administrators and auditors."
)
class AsOf:
    at: datetime | None = None
    position: int | None = None


@dataclass(frozen=True)
class Past:
    position: int
    views: Views
    directory: Directory


class Histories:
    """The gateway's pasts: views and directories at positions asked for, a few kept."""

    def __init__(self, bus: Bus, settings: GatewaySettings) -> None:
        self._bus = bus
        root, self._made = settings.history_dir, None
        if root is None:  # a directory of its own, removed on close
            root = self._made = Path(tempfile.mkdtemp(prefix="jy-history-"))
        self.views = History(
            bus, root, snapshot_every=settings.history_snapshot_every,
            keep_snapshots=settings.history_snapshots,
        )  # fmt: skip
        self._reader = DirectReader(bus.replies, EVENTS_STREAM)
        self._directories: OrderedDict[int, Directory] = OrderedDict()
        self._folding = asyncio.Lock()

    async def position_of(self, as_of: AsOf) -> int:
        if (as_of.at is None) == (as_of.position is None):
            raise invalid("asOf takes exactly one of at and position")
        if as_of.position is not None:
            return as_of.position
        assert as_of.at is not None
        if as_of.at.tzinfo is None:
            raise invalid("asOf.at needs a time zone (e.g. 2026-11-28T14:00:00Z)")
        # The events stored at ``at`` itself belong to that moment: ask for the first after.
        found = await self._reader.seq_before(as_of.at + timedelta(microseconds=1), events_of())
        return found if found is not None else await self.views.end()

    async def at(self, position: int) -> Past:
        try:
            engine = await self.views.views_at(position)
        except PositionError as exc:
            raise invalid(str(exc)) from None
        return Past(position, SqlViews(engine), await self._directory_at(position))

    async def _directory_at(self, position: int) -> Directory:
        async with self._folding:
            found = self._directories.get(position)
            if found is None:
                found = self._directories[position] = await directory_at(self._bus, position)
            self._directories.move_to_end(position)
            while len(self._directories) > KEEP_DIRECTORIES:
                self._directories.popitem(last=False)
            return found

    async def close(self) -> None:
        await self.views.close()
        if self._made is not None:
            shutil.rmtree(self._made, ignore_errors=True)


async def directory_at(bus: Bus, position: int) -> Directory:
    """The tenancy directory folded from the first event up to ``position``. An event that
    cannot be decoded is passed over (the live folds hold its aggregate until corrected)."""
    directory = Directory()
    tail = Tail(bus, subjects=TENANCY_SUBJECTS, batch=1024)
    try:
        while tail.position < position:
            fetched = await tail.fetch_raw(timeout=1.0)
            for message in fetched:
                if message.seq > position:
                    break
                try:
                    directory.apply(decode(message))
                except ValueError as exc:
                    log.debug("history: tenancy seq %d passed over: %r", message.seq, exc)
            if tail.pending == 0:
                break  # nothing more of the tenancy's stored
    finally:
        await tail.close()
    directory.position = position
    return directory


def may_ask_the_past(me: Principal) -> bool:
    return me.reads_every_domain or me.role in LOG_READERS


async def past(info: Info[Context, Any], as_of: AsOf) -> Past:
    """The state at ``as_of``, if the caller may ask (administrators and auditors)."""
    me = who(info)
    if not may_ask_the_past(me):
        raise forbidden(info, "asOf is for administrators and auditors")
    ctx = ctx_of(info)
    histories = ctx.services.histories
    if histories is None:
        raise invalid("this gateway keeps no history (asOf is not served)")
    position = await histories.position_of(as_of)
    ctx.past.add(position)
    if len(ctx.past) > MAX_MOMENTS:
        # Each new moment may cost a build: a request is held to a few.
        raise invalid(f"one request reads at most {MAX_MOMENTS} moments of the past")
    return await histories.at(position)


async def views_of(info: Info[Context, Any], as_of: AsOf | None) -> Views:
    """The live views, or the views as they were at ``as_of``."""
    if as_of is None:
        return ctx_of(info).views
    return (await past(info, as_of)).views


async def directory_of(info: Info[Context, Any], as_of: AsOf | None) -> Directory:
    """The live directory, or the directory as it was at ``as_of``."""
    if as_of is None:
        return ctx_of(info).directory
    return (await past(info, as_of)).directory
