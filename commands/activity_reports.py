"""A reporter's side of idle timeouts: activity is noted as it happens (a dict set, no I/O) and
written on the reporter's own ``ev.activity.<reporter id>`` when flushed (the reporter's loop
flushes every interval): at most one report per session, kernel and source per flush, all of a
flush's reports in one ``SessionActivityReported`` (several past ``REPORTS_PER_EVENT``), and
nothing when nothing was noted. The node agent notes output, the app proxy app and terminal
traffic.

Reads the last event of ``ev.activity.<reporter id>`` (once, before the first write) and
writes that subject, guarded like every write (``commands.unit_of_work``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from commands.activity import Activity, record
from commands.unit_of_work import Changes, UnitOfWork
from events.cancelling import cancelling
from events.domain.activity import REPORTS_PER_EVENT, ActivityReport
from events.envelope import Cause, StoredEvent
from events.fold import FoldedState
from events.writes import AggregateRef, Store
from schemas.activity import ActivitySource
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.subjects import AggregateType

log = logging.getLogger(__name__)

PER_WRITE = 2 * REPORTS_PER_EVENT
"""Reports per write (one atomic batch of two events at most, ~140 KB): a larger flush is
several writes."""
ATTEMPTS = 3
Key = tuple[str, str | None, ActivitySource]


class ReporterLog(FoldedState):
    """The reporter's aggregate as stored (from its last event on)."""

    consumer = "activity-reporter"

    def __init__(self) -> None:
        super().__init__()
        self.activity: Activity | None = None
        self.last_cause = ""
        """The causation id of the last event stored: a write whose outcome was unknown and
        that is found stored when read back is not written again."""

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        self.last_cause = envelope.causation_id
        self.activity = Activity.at_version(
            envelope.aggregate_id, envelope.aggregate_version, envelope.occurred_at
        )


def _always(session_id: str, kernel_id: str | None) -> bool:
    return True


def _report(key: Key, at: float, peak: float | None) -> ActivityReport:
    session_id, kernel_id, source = key
    when = datetime.fromtimestamp(at, UTC)
    return ActivityReport(
        session_id=session_id, kernel_id=kernel_id, source=source, at=when, utilization_pct=peak
    )


class ActivityReports:
    def __init__(self, store: Store, reporter_id: str, actor: Actor) -> None:
        self.ref = AggregateRef(AggregateType.ACTIVITY, reporter_id)
        self._store = store
        self._actor = actor
        self._noted: dict[Key, float] = {}
        self._peaks: dict[Key, float] = {}
        """Utilisation noted (``note_use``): the highest of the interval, per key."""
        self._log = ReporterLog()
        self._work = UnitOfWork(store, self._log, lambda: Changes(self._log), attempts=ATTEMPTS)
        self._loaded = False
        """Whether the aggregate's last event (its guard and version) was read."""

    def note(
        self, session_id: str, kernel_id: str | None, source: ActivitySource, at: float
    ) -> None:
        """Activity seen at ``at`` (epoch seconds; the latest noted wins). Called for every
        output line and every proxied request, so it only sets a dict entry."""
        self._noted[(session_id, kernel_id, source)] = at

    def note_use(
        self, session_id: str, kernel_id: str, source: ActivitySource, at: float, pct: float
    ) -> None:
        """Utilisation of ``pct`` percent sampled at ``at``: the report says the highest of
        the interval, at the latest sample's time."""
        key = (session_id, kernel_id, source)
        self._noted[key] = at
        self._peaks[key] = max(pct, self._peaks.get(key, 0.0))

    @property
    def pending(self) -> int:
        """Reports noted and not yet written."""
        return len(self._noted)

    async def flush(self, now: datetime, alive: Callable[[str, str | None], bool] = _always) -> int:
        """Write what was noted since the last flush about sessions (kernels) ``alive`` says
        still run; returns how many reports were written. Reports a write failed to store are
        noted again (unless newer activity was noted meanwhile) and the error is raised."""
        noted, self._noted = self._noted, {}
        peaks, self._peaks = self._peaks, {}
        reports = [
            _report(key, at, peaks.get(key)) for key, at in noted.items() if alive(key[0], key[1])
        ]
        written = 0
        try:
            for first in range(0, len(reports), PER_WRITE):
                chunk = reports[first : first + PER_WRITE]
                await self._write(chunk, now)
                written += len(chunk)
        except BaseException:
            for report in reports[written:]:
                key = (report.session_id, report.kernel_id, report.source)
                self._noted.setdefault(key, report.at.timestamp())
                if report.utilization_pct is not None:
                    peak = max(report.utilization_pct, self._peaks.get(key, 0.0))
                    self._peaks[key] = peak
            raise
        return written

    async def run(
        self,
        interval_s: float,
        clock: Callable[[], datetime],
        alive: Callable[[str, str | None], bool] = _always,
    ) -> None:
        """Flush every ``interval_s`` until cancelled. A flush that fails (NATS away) is
        logged, and what it held is written by the next one."""
        while not cancelling():
            await asyncio.sleep(interval_s)
            try:
                await self.flush(clock(), alive)
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                log.warning("%s: activity not reported yet: %r", self.ref, exc)

    async def _write(self, reports: Sequence[ActivityReport], now: datetime) -> None:
        if not self._loaded:
            await self._load()
        state = self._log
        command = new_id()
        cause = Cause(
            causation_id=command, correlation_id=command, actor=self._actor, tenant=SYSTEM_TENANT
        )

        def decide(changes: Changes) -> None:
            if state.last_cause == command:
                return  # stored by an attempt whose answer was lost
            known = state.activity
            activity = changes.track(known) if known is not None else None
            for first in range(0, len(reports), REPORTS_PER_EVENT):
                chunk = reports[first : first + REPORTS_PER_EVENT]
                activity = record(activity, self.ref.id, chunk, now)
            assert activity is not None
            if known is None:
                changes.add(activity)
            changes.unit(cause, activity)

        await self._work.run(decide, what=f"reporting activity on {self.ref}")

    async def _load(self) -> None:
        """Read the aggregate's last event (its guard and version), once, before writing."""
        last = (await self._store.last_seqs([self.ref]))[self.ref]
        if last:
            for event in (await self._store.read(self.ref, after_seq=last - 1)).events:
                self._log.apply(event)
        self._loaded = True
