"""A reporter's activity reports in memory: nothing noted writes nothing; many notes of one
session and source in an interval are one report, with the latest time; sessions no longer
running are not reported; a restarted reporter continues its aggregate from its last event; a
write whose answer was lost is not written twice, and one that failed is written next time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from commands.activity_reports import PER_WRITE, ActivityReports
from commands.unit_of_work import TooManyConflictsError
from events.catalogue import CATALOGUE
from events.domain.activity import REPORTS_PER_EVENT, ActivityReport, SessionActivityReported
from events.envelope import Envelope
from events.memory import InMemoryStore
from schemas.activity import ActivitySource
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.subjects import AggregateType
from tests.unit.scenario import T0

OUTPUT, APP = ActivitySource.OUTPUT, ActivitySource.APP
ACTOR = Actor.service("agent")


def reports(store: InMemoryStore) -> list[tuple[int, ActivityReport]]:
    """Every report written, with the version of the event that carried it."""
    found = []
    for stored in store.events():
        event = CATALOGUE.decode(stored.envelope)
        assert isinstance(event, SessionActivityReported)
        found += [(stored.envelope.aggregate_version, report) for report in event.reports]
    return found


def seconds(n: float) -> float:
    return (T0 + timedelta(seconds=n)).timestamp()


async def test_nothing_noted_writes_nothing() -> None:
    store = InMemoryStore()
    reporter = ActivityReports(store, "node-1", ACTOR)

    assert await reporter.flush(T0) == 0
    assert store.events() == [] and store.commits == 0


async def test_notes_in_one_interval_are_one_report_per_session_kernel_and_source() -> None:
    store = InMemoryStore()
    reporter = ActivityReports(store, "node-1", ACTOR)
    for n in range(1000):
        reporter.note("s-1", "k-1", OUTPUT, seconds(n / 100))
    reporter.note("s-1", None, APP, seconds(3))
    reporter.note("s-2", "k-2", OUTPUT, seconds(4))

    assert await reporter.flush(T0 + timedelta(seconds=60)) == 3

    got = {(e.session_id, e.kernel_id, e.source): e.at for _, e in reports(store)}
    assert got == {
        ("s-1", "k-1", OUTPUT): T0 + timedelta(seconds=9.99),
        ("s-1", None, APP): T0 + timedelta(seconds=3),
        ("s-2", "k-2", OUTPUT): T0 + timedelta(seconds=4),
    }
    assert store.commits == 1 and len(store.events()) == 1  # one event carries the flush
    assert await reporter.flush(T0 + timedelta(seconds=120)) == 0  # nothing new: nothing


async def test_a_large_flush_is_several_events_and_writes() -> None:
    store = InMemoryStore()
    reporter = ActivityReports(store, "proxy-1", ACTOR)
    count = PER_WRITE + REPORTS_PER_EVENT + 1
    for n in range(count):
        reporter.note(f"s-{n}", None, APP, seconds(1))

    assert await reporter.flush(T0) == count
    assert store.commits == 2  # PER_WRITE reports each at most
    sizes = []
    for stored in store.events():
        event = CATALOGUE.decode(stored.envelope)
        assert isinstance(event, SessionActivityReported)
        sizes.append(len(event.reports))
    assert sizes == [REPORTS_PER_EVENT, REPORTS_PER_EVENT, REPORTS_PER_EVENT, 1]
    assert {r.session_id for _, r in reports(store)} == {f"s-{n}" for n in range(count)}


def test_a_v1_event_of_one_report_reads_as_a_list_of_one() -> None:
    at = T0 + timedelta(seconds=5)
    v1 = {"session_id": "s-1", "kernel_id": "k-1", "source": "cpu", "at": at.isoformat(),
          "utilization_pct": 42.0}  # fmt: skip
    stored = Envelope(
        event_id=new_id(), name="SessionActivityReported", schema_version=1,
        aggregate_type=AggregateType.ACTIVITY, aggregate_id="node-1", aggregate_version=1,
        occurred_at=at, causation_id="c", correlation_id="c", actor=ACTOR, tenant=SYSTEM_TENANT,
        payload=v1,
    )  # fmt: skip
    event = CATALOGUE.decode(stored)
    assert isinstance(event, SessionActivityReported)
    assert event.reports == (
        ActivityReport(session_id="s-1", kernel_id="k-1", source=ActivitySource.CPU, at=at,
                       utilization_pct=42.0),
    )  # fmt: skip


async def test_sessions_no_longer_running_are_not_reported() -> None:
    store = InMemoryStore()
    reporter = ActivityReports(store, "node-1", ACTOR)
    reporter.note("ended", "k-1", OUTPUT, seconds(1))
    reporter.note("running", "k-2", OUTPUT, seconds(1))

    assert await reporter.flush(T0, lambda session, kernel: session == "running") == 1
    assert [e.session_id for _, e in reports(store)] == ["running"]


async def test_a_restarted_reporter_continues_its_aggregate_from_the_last_event() -> None:
    store = InMemoryStore()
    first = ActivityReports(store, "node-1", ACTOR)
    first.note("s-1", "k-1", OUTPUT, seconds(1))
    first.note("s-2", "k-2", OUTPUT, seconds(1))
    await first.flush(T0)

    again = ActivityReports(store, "node-1", ACTOR)
    again.note("s-1", "k-1", OUTPUT, seconds(70))
    await again.flush(T0 + timedelta(seconds=120))

    assert [version for version, _ in reports(store)] == [1, 1, 2]


async def test_a_write_whose_answer_was_lost_is_not_written_twice() -> None:
    store = InMemoryStore()
    reporter = ActivityReports(store, "node-1", ACTOR)
    reporter.note("s-1", "k-1", OUTPUT, seconds(1))
    store.fail_next(stored=True)

    assert await reporter.flush(T0) == 1
    assert len(reports(store)) == 1


async def test_what_a_failed_write_held_is_written_by_the_next_flush() -> None:
    store = InMemoryStore()
    reporter = ActivityReports(store, "node-1", ACTOR)
    reporter.note("s-1", "k-1", OUTPUT, seconds(1))
    for _ in range(3):  # every attempt of the unit of work
        store.fail_next(stored=False)

    with pytest.raises(TooManyConflictsError):
        await reporter.flush(T0)
    reporter.note("s-2", "k-2", OUTPUT, seconds(2))
    assert reporter.pending == 2

    assert await reporter.flush(T0 + timedelta(seconds=60)) == 2
    assert {e.session_id for _, e in reports(store)} == {"s-1", "s-2"}


def test_reports_are_timezone_aware() -> None:
    report = ActivityReport(session_id="s-1", source=OUTPUT, at=datetime(2026, 1, 1, tzinfo=UTC))
    assert report.kernel_id is None
    with pytest.raises(ValueError, match="timezone"):
        ActivityReport(session_id="s-1", source=OUTPUT, at=datetime(2026, 1, 1))


def test_an_event_carries_at_least_one_report() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        SessionActivityReported(reports=())
