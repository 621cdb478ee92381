"""Quota scope rules (holdings keyed by session id), as given-events / when-command /
then-events."""

from __future__ import annotations

from commands.quota import Quota
from events.domain.quota import (
    QuotaReleased,
    QuotaReserved,
    QuotaScopeOpened,
    QuotaSessionDequeued,
    QuotaSessionQueued,
)
from schemas.resources import ResourceSlots
from schemas.tenancy import ScopeKind
from tests.unit.scenario import T0, at, given, then

QID = "keypair-AK1"
ONE_GPU = ResourceSlots.of(cpu=1, gpu=1)
OPENED = QuotaScopeOpened(scope=ScopeKind.KEYPAIR, scope_id="AK1")
QUEUED = QuotaSessionQueued(session_id="s1", slots=ONE_GPU)
RESERVED = QuotaReserved(session_id="s1", slots=ONE_GPU)
NOW = at(60)


def test_open_names_the_scope_and_holds_nothing() -> None:
    quota = Quota.open(ScopeKind.KEYPAIR, "AK1", T0)

    assert then(quota) == [OPENED]
    assert quota.id == QID
    assert (quota.queued, quota.reserved, quota.used) == ({}, {}, ResourceSlots())


def test_queue_counts_a_waiting_session_once() -> None:
    quota = given(Quota, QID, OPENED)

    assert quota.queue("s1", ONE_GPU, NOW)
    assert not quota.queue("s1", ONE_GPU, NOW)

    assert then(quota) == [QUEUED]
    assert quota.queued_total == ONE_GPU


def test_reserve_moves_a_session_from_the_queue_to_the_reservations() -> None:
    quota = given(Quota, QID, OPENED, QUEUED)

    assert quota.reserve("s1", ONE_GPU, NOW)

    assert then(quota) == [RESERVED]
    assert (quota.queued, quota.used) == ({}, ONE_GPU)


def test_reserving_again_or_queueing_a_reserved_session_changes_nothing() -> None:
    quota = given(Quota, QID, OPENED, QUEUED, RESERVED)

    assert not quota.reserve("s1", ONE_GPU, NOW)
    assert not quota.queue("s1", ONE_GPU, NOW)
    assert then(quota) == []


def test_release_gives_the_slots_back_once() -> None:
    quota = given(Quota, QID, OPENED, RESERVED, QuotaReserved(session_id="s2", slots=ONE_GPU))

    assert quota.release("s1", "session ended", NOW)
    assert not quota.release("s1", "session ended", NOW)
    assert not quota.release("unknown", "session ended", NOW)

    assert then(quota) == [QuotaReleased(session_id="s1", reason="session ended")]
    assert quota.used == ONE_GPU


def test_dequeue_takes_a_waiting_session_off_the_queue_once() -> None:
    quota = given(Quota, QID, OPENED, QUEUED)

    assert quota.dequeue("s1", "cancelled", NOW)
    assert not quota.dequeue("s1", "cancelled", NOW)

    assert then(quota) == [QuotaSessionDequeued(session_id="s1", reason="cancelled")]
    assert quota.queued == {}
