"""The log's invariant check beyond allocations: status transitions, quotas against the limits
the log says applied, one decision per cause, and events that do not decode (reported, the
rest still checked). Each rule: a clean log, and a violating one with its rule and position.
The logs are written by hand with the real events (``Log`` of ``test_allocation_invariants``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from events.audit.invariants import InvariantReport
from events.audit.invariants.check import Checker
from events.audit.invariants.lifecycle import KERNEL_FACTS, STATUS_OF
from events.audit.invariants.replay import read
from events.catalogue import CATALOGUE
from events.direct import RawMessage
from events.domain.node import ResourcesReleased
from events.domain.quota import QuotaReleased, QuotaReserved, QuotaScopeOpened
from events.domain.session import (
    SessionAdmitted,
    SessionCancelled,
    SessionCreating,
    SessionKernelStarted,
    SessionStarted,
    SessionTerminating,
)
from events.domain.tenancy import (
    KeypairCreated,
    ProjectCreated,
    ResourcePolicyCreated,
    ResourcePolicyModified,
)
from events.envelope import StoredEvent
from schemas.subjects import AggregateType
from schemas.tenancy import KeypairPolicyLimits, PolicyKind, ScopeKind, SlotLimits
from tests.unit.scenario import T0
from tests.unit.test_allocation_invariants import ONE_GPU, SMALL, Log

GPU_LIMIT = KeypairPolicyLimits(
    total_resource_slots=SlotLimits(gpu_hundredths=100), max_concurrent_sessions=3
)


def rules(report: InvariantReport) -> list[tuple[int | None, str]]:
    return [(v.seq, v.rule) for v in report.violations]


# ---- status transitions ------------------------------------------------------------------


def test_every_session_event_has_its_status_rule() -> None:
    session_events = {
        name
        for name in CATALOGUE.names()
        if CATALOGUE.event_class(name).aggregate_type is AggregateType.SESSION
    }
    assert session_events == {*STATUS_OF, "SessionRequested", "SessionRequeued", *KERNEL_FACTS}


def test_a_session_through_every_status_in_order_is_legal() -> None:
    log = Log().node("n1").request("s1", ONE_GPU).add("s1", SessionAdmitted())
    log.schedule("s1", {"s1-k0": "n1"}).allocate("n1", "s1-k0", "s1", ONE_GPU)
    log.add("s1", SessionCreating(reason="c")).add("s1", SessionStarted(reason="up"))
    log.add("s1", SessionTerminating(reason="asked")).release("n1", "s1-k0").end("s1")
    assert log.report().violations == []


def test_a_status_after_the_end_is_an_illegal_transition() -> None:
    log = Log().node("n1").placed("s1", "n1").release("n1", "s1-k0").end("s1")
    log.add("s1", SessionStarted(reason="late"))
    assert rules(log.report()) == [(len(log.events), "transition")]
    assert "TERMINATED -> RUNNING" in log.report().violations[0].text


def test_a_kernel_fact_of_a_pending_session_or_of_another_kernel() -> None:
    log = Log().node("n1").request("s1", SMALL)
    log.add("s1", SessionKernelStarted(kernel_id="s1-k0"))
    assert rules(log.report(settled=False)) == [(3 + 1, "transition")]
    log = Log().node("n1").placed("s1", "n1", need=SMALL)
    log.add("s1", SessionKernelStarted(kernel_id="other"))
    assert rules(log.report()) == [(len(log.events), "transition")]


def test_an_event_before_the_request_and_a_second_request() -> None:
    log = Log().add("s1", SessionStarted(reason="?"))
    assert rules(log.report()) == [(1, "transition")]
    log = Log().request("s1", SMALL).request("s1", SMALL)
    assert rules(log.report()) == [(2, "transition")]


# ---- quota -------------------------------------------------------------------------------


def tenancy(log: Log, limits: KeypairPolicyLimits = GPU_LIMIT) -> Log:
    policy = ResourcePolicyCreated(kind=PolicyKind.KEYPAIR, name="default", keypair=limits)
    log.add("keypair-default", policy)
    log.add("ak", KeypairCreated(user_id="u", domain="d", secret_key_id="k"))
    log.add("p", ProjectCreated(domain="d", name="p", total_resource_slots=SlotLimits()))
    return log.add("keypair-ak", QuotaScopeOpened(scope=ScopeKind.KEYPAIR, scope_id="ak"))


def reserve(log: Log, scope: str, *sessions: str, at: datetime = T0) -> Log:
    return log.add(scope, QuotaReserved(sessions=dict.fromkeys(sessions, ONE_GPU)), at=at)


def test_reservations_within_the_limits_and_after_a_release() -> None:
    log = tenancy(Log())
    reserve(log, "keypair-ak", "s1").add("keypair-ak", QuotaReleased(sessions={"s1": "ended"}))
    reserve(log, "keypair-ak", "s2").add("project-p", QuotaReserved(sessions={"s2": SMALL}))
    report = log.report()
    assert report.violations == []
    assert report.reservations == 3


def test_a_reservation_over_the_keypair_limit() -> None:
    log = reserve(reserve(tenancy(Log()), "keypair-ak", "s1"), "keypair-ak", "s2")
    assert rules(log.report()) == [(len(log.events), "quota")]
    assert "keypair ak over its limits: gpu 200/100" in log.report().violations[0].text


def test_more_concurrent_sessions_than_the_policy_allows() -> None:
    limits = KeypairPolicyLimits(max_concurrent_sessions=1)
    log = tenancy(Log(), limits).add("keypair-ak", QuotaReserved(sessions={"a": SMALL}))
    log.add("keypair-ak", QuotaReserved(sessions={"b": SMALL}))
    assert rules(log.report()) == [(len(log.events), "quota")]


def test_a_reservation_on_an_unknown_project_or_a_keypair_without_policy() -> None:
    log = Log().add("project-x", QuotaReserved(sessions={"s1": SMALL}))
    log.add("keypair-nobody", QuotaReserved(sessions={"s1": SMALL}))
    log.add("user-u", QuotaReserved(sessions={"s1": SMALL}))  # users have no limits
    assert rules(log.report()) == [(1, "quota"), (2, "quota")]


def test_a_lowered_limit_applies_after_its_grace() -> None:
    lower = ResourcePolicyModified(keypair=KeypairPolicyLimits(max_concurrent_sessions=1))
    log = tenancy(Log(), KeypairPolicyLimits()).add("keypair-default", lower, at=T0)
    reserve(log, "keypair-ak", "s1", "s2", at=T0 + timedelta(seconds=1))  # may not know yet
    assert log.report().violations == []
    reserve(log, "keypair-ak", "s3", at=T0 + timedelta(seconds=60))
    assert rules(log.report()) == [(len(log.events), "quota")]


def test_a_reservation_left_after_its_session_ended_once_settled() -> None:
    log = tenancy(Log()).request("s1", ONE_GPU)
    reserve(log, "keypair-ak", "s1").add("s1", SessionCancelled(reason="gone"))
    assert log.report(settled=False).ok
    assert rules(log.report()) == [(len(log.events) - 1, "not-given-back")]
    assert log.add("keypair-ak", QuotaReleased(sessions={"s1": "ended"})).report().ok


# ---- decisions ---------------------------------------------------------------------------


def test_one_cause_writes_one_run_of_events_per_aggregate() -> None:
    log = Log().node("n1").node("n2")
    log.allocate("n1", "k1", "s1", SMALL)
    log.add("n1", log_release("k1"), cause="c1").add("n1", log_release("k2"), cause="c1")
    log.add("n2", log_release("k3"), cause="c1")  # the same cause on another aggregate
    assert [v.rule for v in log.report().violations if v.rule == "decided-twice"] == []
    log.add("n1", log_release("k4"), cause="c2").add("n1", log_release("k5"), cause="c1")
    found = [v for v in log.report().violations if v.rule == "decided-twice"]
    assert [v.seq for v in found] == [len(log.events)]


def log_release(kernel: str) -> ResourcesReleased:
    return ResourcesReleased(kernel_id=kernel, reason="gone")


def test_an_event_stored_twice() -> None:
    log = Log().node("n1")
    again = StoredEvent(len(log.events) + 1, log.events[-1].envelope)
    report = Checker()
    for event in [*log.events, again]:
        e = event.envelope
        report.apply(
            event.seq, e.name, e.aggregate_type.value, e.aggregate_id, e.aggregate_version,
            e.event_id, e.causation_id, e.occurred_at, e.payload,
        )  # fmt: skip
    found = report.finish(settled=True)
    assert ("duplicate-event" in {v.rule for v in found.violations}) is True
    assert {(v.seq, v.rule) for v in found.violations} == {
        (again.seq, "duplicate-event"),
        (again.seq, "version"),
        (again.seq, "registration"),
    }


# ---- reading the stored bytes ------------------------------------------------------------


def raw(event: StoredEvent) -> RawMessage:
    e = event.envelope
    return RawMessage(event.seq, e.subject, e.model_dump_json().encode(), {})


def test_the_stored_bytes_read_as_the_decoded_events() -> None:
    log = Log().node("n1").placed("s1", "n1").placed("s2", "n1", need=ONE_GPU)
    log.allocate("n1", "s2-k0", "s2", ONE_GPU)
    checker = Checker()
    for event in log.events:
        read(checker, raw(event))
    assert rules(checker.finish(settled=True)) == rules(log.report())
    assert rules(log.report()) != []


def test_an_undecodable_event_is_reported_and_the_rest_still_checked() -> None:
    log = Log().node("n1").placed("s1", "n1", need=SMALL)
    log.allocate("n1", "s1-k0", "s1", SMALL)  # after the broken ones: still found
    checker = Checker()
    messages = [raw(e) for e in log.events]
    broken = RawMessage(99, "ev.node.n1", b"{not json", {})
    misfiled = RawMessage(100, "ev.node.n2", messages[-1].data, {})
    shapeless = RawMessage(101, "ev.node.n1", b'{"name": "x"}', {})
    for message in [*messages[:2], broken, misfiled, shapeless, *messages[2:]]:
        read(checker, message)
    report = checker.finish(settled=True)
    assert rules(report) == [
        (99, "undecodable"),
        (100, "undecodable"),
        (101, "undecodable"),
        (len(log.events), "double-allocation"),
    ]
    assert report.events == len(messages) + 3
