"""Quota scope rules (holdings keyed by session id), as given-events / when-command /
then-events; and v1 holding events (one session each, in old logs) still load."""

from __future__ import annotations

from datetime import UTC, datetime

from commands.quota import Quota
from commands.unit_of_work import working_copy
from events.catalogue import CATALOGUE
from events.domain.quota import (
    QuotaReleased,
    QuotaReserved,
    QuotaScopeOpened,
    QuotaSessionDequeued,
    QuotaSessionQueued,
)
from events.envelope import Envelope
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind
from tests.unit.scenario import T0, at, given, then

QID = "keypair-AK1"
ONE_GPU = ResourceSlots.of(cpu=1, gpu=1)
HALF_GPU = ResourceSlots.of(cpu="0.5", gpu="0.5")
OPENED = QuotaScopeOpened(scope=ScopeKind.KEYPAIR, scope_id="AK1")
QUEUED = QuotaSessionQueued(sessions={"s1": ONE_GPU})
RESERVED = QuotaReserved(sessions={"s1": ONE_GPU})
NOW = at(60)


def test_open_names_the_scope_and_holds_nothing() -> None:
    quota = Quota.open(ScopeKind.KEYPAIR, "AK1", T0)

    assert then(quota) == [OPENED]
    assert quota.id == QID
    assert (quota.queued, quota.reserved, quota.used) == ({}, {}, ResourceSlots())


def test_queue_counts_a_waiting_session_once() -> None:
    quota = given(Quota, QID, OPENED)

    assert quota.queue({"s1": ONE_GPU}, NOW)
    assert not quota.queue({"s1": ONE_GPU}, NOW)

    assert then(quota) == [QUEUED]
    assert quota.queued_total == ONE_GPU


def test_queueing_many_sessions_is_one_event_naming_only_the_new_ones() -> None:
    quota = given(Quota, QID, OPENED, QUEUED)

    assert quota.queue({"s1": ONE_GPU, "s2": HALF_GPU, "s3": HALF_GPU}, NOW)

    assert then(quota) == [QuotaSessionQueued(sessions={"s2": HALF_GPU, "s3": HALF_GPU})]
    assert quota.queued_total == ONE_GPU + HALF_GPU + HALF_GPU


def test_reserve_moves_sessions_from_the_queue_to_the_reservations() -> None:
    quota = given(Quota, QID, OPENED, QuotaSessionQueued(sessions={"s1": ONE_GPU, "s2": ONE_GPU}))

    assert quota.reserve({"s1": ONE_GPU, "s2": ONE_GPU}, NOW)

    assert then(quota) == [QuotaReserved(sessions={"s1": ONE_GPU, "s2": ONE_GPU})]
    assert (quota.queued, quota.queued_total) == ({}, ResourceSlots())
    assert quota.used == ONE_GPU + ONE_GPU


def test_reserving_again_or_queueing_a_reserved_session_changes_nothing() -> None:
    quota = given(Quota, QID, OPENED, QUEUED, RESERVED)

    assert not quota.reserve({"s1": ONE_GPU}, NOW)
    assert not quota.queue({"s1": ONE_GPU}, NOW)
    assert not quota.reserve({}, NOW)
    assert then(quota) == []


def test_release_gives_the_slots_back_once() -> None:
    quota = given(Quota, QID, OPENED, RESERVED, QuotaReserved(sessions={"s2": ONE_GPU}))

    assert quota.release({"s1": "session ended", "unknown": "session ended"}, NOW)
    assert not quota.release({"s1": "session ended"}, NOW)

    assert then(quota) == [QuotaReleased(sessions={"s1": "session ended"})]
    assert quota.used == ONE_GPU


def test_dequeue_takes_waiting_sessions_off_the_queue_once() -> None:
    quota = given(Quota, QID, OPENED, QUEUED)

    assert quota.dequeue({"s1": "cancelled"}, NOW)
    assert not quota.dequeue({"s1": "cancelled"}, NOW)

    assert then(quota) == [QuotaSessionDequeued(sessions={"s1": "cancelled"})]
    assert quota.queued == {}


def test_the_kept_sums_follow_every_change_and_a_working_copy_keeps_its_own() -> None:
    quota = given(Quota, QID, OPENED, QUEUED)
    assert (quota.used, quota.queued_total) == (ResourceSlots(), ONE_GPU)  # sums now kept
    copy = working_copy(quota)

    copy.reserve({"s1": ONE_GPU, "s2": HALF_GPU}, NOW)
    copy.release({"s2": "ended"}, NOW)

    assert (copy.used, copy.queued_total) == (ONE_GPU, ResourceSlots())
    assert (quota.used, quota.queued_total) == (ResourceSlots(), ONE_GPU)


def _v1(version: int, name: str, payload: dict[str, object]) -> Envelope:
    return Envelope(
        event_id=f"old-{version}", name=name, schema_version=1,
        aggregate_type=AggregateType.QUOTA, aggregate_id=QID, aggregate_version=version,
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC), causation_id="c", correlation_id="c",
        actor=Actor.service("old-scheduler"), tenant=SYSTEM_TENANT, payload=payload,
    )  # fmt: skip


def test_single_session_events_of_old_logs_load_as_one_entry_each() -> None:
    slots = ONE_GPU.model_dump(mode="json")
    old = [
        _v1(1, "QuotaScopeOpened", {"scope": "keypair", "scope_id": "AK1"}),
        _v1(2, "QuotaSessionQueued", {"session_id": "s1", "slots": slots}),
        _v1(3, "QuotaSessionQueued", {"session_id": "s2", "slots": slots}),
        _v1(4, "QuotaReserved", {"session_id": "s1", "slots": slots}),
        _v1(5, "QuotaSessionDequeued", {"session_id": "s2", "reason": "cancelled"}),
        _v1(6, "QuotaReserved", {"session_id": "s3", "slots": slots}),
        _v1(7, "QuotaReleased", {"session_id": "s3", "reason": "terminated"}),
    ]

    quota = Quota.rehydrate(old)

    assert quota is not None
    assert (quota.queued, quota.reserved, quota.used) == ({}, {"s1": ONE_GPU}, ONE_GPU)
    assert CATALOGUE.decode(old[6]) == QuotaReleased(sessions={"s3": "terminated"})


def test_the_kept_sums_are_no_part_of_what_a_quota_is() -> None:
    asked, unasked = given(Quota, QID, OPENED, QUEUED), given(Quota, QID, OPENED, QUEUED)
    assert asked.used == ResourceSlots()  # computes and keeps the sums on one of them

    assert asked == unasked
