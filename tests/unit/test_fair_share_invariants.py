"""The replay check's fair-share rule (``events.audit.invariants.fair_share``) on hand-made
logs: factors a pass recorded pass when they are what the log implies, worked out by hand
here; a tampered factor, a waiting owner left out, a release long folded and ignored are
reported; a change within the grace of the pass is allowed either way (the scheduler may not
have folded it yet), and what the log cannot judge is counted apart."""

from __future__ import annotations

from datetime import timedelta

import pytest

from events.domain.node import NodeRegistered, ResourcesAllocated, ResourcesReleased
from events.domain.session import (
    SessionAdmitted,
    SessionPendingReasonChanged,
    SessionRequested,
    SessionScheduled,
)
from events.domain.tenancy import ResourceGroupCreated, UserModified
from schemas.fair_share import FairShareSettings, FairShareStanding
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.tenancy import GroupScheduling, QueuePolicy, Role, SessionOwner
from tests.unit.scenario import T0
from tests.unit.test_allocation_invariants import GIB, Log

GPU = ResourceSlots(cpu_milli=1000, memory_bytes=GIB, gpu_hundredths=100)
FOUR_GPUS = ResourceSlots(cpu_milli=16000, memory_bytes=64 * GIB, gpu_hundredths=400)
FAIR = GroupScheduling(
    queue_policy=QueuePolicy.FAIR_SHARE,
    fair_share=FairShareSettings(
        usage_half_life_s=60, gpu_usage_weight=10, cpu_usage_weight=0, memory_usage_weight=0
    ),
)
"""Only GPUs weigh: the group's four GPUs held forever is U_norm 1, one GPU held for one
half-life (then dropped to half) is (1 - 1/2) / 4 = 1/8."""
HEAVY = SessionOwner(access_key="AK-H", user_id="u-heavy", project_id="p1", domain="d1")
LIGHT = SessionOwner(access_key="AK-L", user_id="u-light", project_id="p1", domain="d1")


def at(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def cluster() -> Log:
    """A fair-share group with four GPUs; the heavy user holds one from t=40; at t=10 the
    light user and the heavy user each ask for another, which waits."""
    log = Log().add("fs", ResourceGroupCreated(scheduling=FAIR))
    log.add("n1", NodeRegistered(hostname="n1", resource_group="fs", capacity=FOUR_GPUS))
    request(log, "h1", HEAVY, 0)
    log.add("h1", SessionScheduled(placements={"h1-k0": "n1"}, reason="placed"), at=T0 + at(40))
    event = ResourcesAllocated(kernel_id="h1-k0", session_id="h1", slots=GPU)
    log.add("n1", event, at=T0 + at(40))
    return request(request(log, "l1", LIGHT, 10), "h2", HEAVY, 10)


def request(log: Log, session: str, owner: SessionOwner, when: float) -> Log:
    spec = SessionSpec(image="img", kernels=(KernelSpec(resources=GPU),), resource_group="fs")
    asked = SessionRequested(spec=spec, kernel_ids=(f"{session}-k0",), owner=owner)
    log.add(session, asked, at=T0 + at(when))
    return log.add(session, SessionAdmitted(), at=T0 + at(when))


def waits(log: Log, session: str, domain: float, project: float, user: float) -> Log:
    """The pass at t=100 left ``session`` waiting with these factors."""
    standing = FairShareStanding(domain=domain, project=project, user=user)
    event = SessionPendingReasonChanged(reason="no node has 1 free GPU", fair_share=standing)
    return log.add(session, event, at=T0 + at(100))


def test_factors_the_log_implies_pass() -> None:
    # At t=100 the heavy user held one GPU for one half-life: U_norm 1/8 for its user, project
    # and domain (the light user used nothing). Domain and project alone at their levels:
    # 2^(-1/8) = 0.917; two users wait in the project, so each has S = 1/2: the heavy user's
    # 2^(-(1/8)/(1/2)) = 0.841, the light user's 2^0 = 1.
    log = waits(waits(cluster(), "h2", 0.92, 0.92, 0.84), "l1", 0.92, 0.92, 1.0)
    report = log.report()
    assert report.violations == []
    assert (report.fair_shares, report.fair_shares_unchecked) == (2, 0)


def test_a_tampered_factor_is_reported_with_what_the_log_implies() -> None:
    report = waits(cluster(), "h2", 0.92, 0.92, 0.95).report()
    assert [(v.seq, v.rule) for v in report.violations] == [
        (len(cluster().events) + 1, "fair-share")
    ]
    assert report.violations[0].text == (
        "session h2 (user u-heavy of project p1 in domain d1) waited in group fs with "
        "fair-share factors domain 0.92, project 0.92, user 0.95; the log implies "
        "domain 0.92, project 0.92, user 0.84 at that time"
    )
    assert report.fair_shares == 0


def test_an_owner_that_waited_all_along_counts_as_waiting() -> None:
    # Had the pass left the light user out, the heavy user would have had the project to
    # itself: user 2^(-1/8) = 0.92. The light user's session waited since t=10.
    report = waits(cluster(), "h2", 0.92, 0.92, 0.92).report()
    assert [v.rule for v in report.violations] == ["fair-share"]
    assert "the log implies domain 0.92, project 0.92, user 0.84" in report.violations[0].text


@pytest.mark.parametrize(
    ("user", "ok"),
    [
        (0.84, True),  # not folded yet: the GPU counted as held until t=100
        (0.86, True),  # folded: held 55 s, then 5 s of decay: U_norm 0.111, 2^(-0.222)
        (0.90, False),
    ],
)
def test_a_release_within_the_grace_may_or_may_not_have_been_folded(user: float, ok: bool) -> None:
    domain = 0.92 if user == 0.84 else 0.93
    report = waits(released(95), "h2", domain, domain, user).report()
    assert ([] if ok else ["fair-share"]) == [v.rule for v in report.violations]


def released(when: float) -> Log:
    """``cluster``, the heavy user's GPU given back at ``when``."""
    event = ResourcesReleased(kernel_id="h1-k0", reason="exited")
    return cluster().add("n1", event, at=T0 + at(when))


def test_a_release_long_before_the_pass_must_have_been_folded() -> None:
    # Released at t=50: held 10 s, then 50 s of decay: U_norm 0.0153, user 2^(-0.0306) = 0.98.
    report = waits(released(50), "h2", 0.92, 0.92, 0.84).report()
    assert [v.rule for v in report.violations] == ["fair-share"]
    assert "the log implies domain 0.99, project 0.99, user 0.98" in report.violations[0].text
    assert waits(released(50), "h2", 0.99, 0.99, 0.98).report().violations == []


def test_a_share_changed_within_the_grace_is_left_unchecked() -> None:
    modified = UserModified(role=Role.USER, policy="default", fair_share=3)
    log = cluster().add("u-light", modified, at=T0 + at(95))
    report = waits(log, "h2", 0.5, 0.5, 0.5).report()
    assert report.violations == []
    assert (report.fair_shares, report.fair_shares_unchecked) == (0, 1)


CAROL = SessionOwner(access_key="AK-C", user_id="u-carol", project_id="p1", domain="d1")


@pytest.mark.parametrize(
    ("user", "ok"),
    [
        (0.84, True),  # carol not in the pass's queue yet: two users, S = 1/2
        (0.77, True),  # carol in it: three users, S = 1/3, 2^(-(1/8)/(1/3)) = 0.771
        (0.92, False),  # the light user left out: it waited all along
    ],
)
def test_a_session_admitted_within_the_grace_may_or_may_not_have_waited(
    user: float, ok: bool
) -> None:
    log = request(cluster(), "c1", CAROL, 95)
    report = waits(log, "h2", 0.92, 0.92, user).report()
    assert ([] if ok else ["fair-share"]) == [v.rule for v in report.violations]


def test_a_session_the_same_pass_placed_was_in_its_queue() -> None:
    # The pass at t=100 placed the light user's session before noting the heavy user's: the
    # light user counted (0.84); had it not, the heavy user would be alone (0.92).
    placed = SessionScheduled(placements={"l1-k0": "n1"}, reason="placed")
    for user, rules in ((0.84, []), (0.92, ["fair-share"])):
        log = cluster().add("l1", placed, at=T0 + at(100))
        allocated = ResourcesAllocated(kernel_id="l1-k0", session_id="l1", slots=GPU)
        log.add("n1", allocated, at=T0 + at(100))  # it holds nothing yet at t=100
        report = waits(log, "h2", 0.92, 0.92, user).report()
        assert [v.rule for v in report.violations] == rules, user


@pytest.mark.parametrize(("early", "ok"), [(0.95, True), (0.90, False)])
def test_a_session_admitted_and_placed_by_one_pass_waited_in_that_pass_only(
    early: float, ok: bool
) -> None:
    # The light user's session is admitted and placed by the pass at t=100 (its
    # SessionScheduled admits it; no SessionAdmitted): its owner was in that pass's queue, so
    # the heavy user shares the project with it (user 0.84, as worked out above) ...
    log = Log().add("fs", ResourceGroupCreated(scheduling=FAIR))
    log.add("n1", NodeRegistered(hostname="n1", resource_group="fs", capacity=FOUR_GPUS))
    request(log, "h1", HEAVY, 0)
    log.add("h1", SessionScheduled(placements={"h1-k0": "n1"}, reason="placed"), at=T0 + at(40))
    log.add("n1", ResourcesAllocated(kernel_id="h1-k0", session_id="h1", slots=GPU), at=T0 + at(40))
    request(log, "h2", HEAVY, 10)
    spec = SessionSpec(image="img", kernels=(KernelSpec(resources=GPU),), resource_group="fs")
    asked = SessionRequested(spec=spec, kernel_ids=("l1-k0",), owner=LIGHT)
    log.add("l1", asked, at=T0 + at(10))
    # ... but not in an earlier pass's, while it waited for admission: at t=70 the heavy
    # user had the project to itself (U_norm 1 - 2^(-1/2) over 4 GPUs = 0.0732: 0.95);
    # sharing it with the light user (0.90) is what that pass could not have seen.
    standing = FairShareStanding(domain=0.95, project=0.95, user=early)
    event = SessionPendingReasonChanged(reason="no node has 1 free GPU", fair_share=standing)
    log.add("h2", event, at=T0 + at(70))
    log.add("l1", SessionScheduled(placements={"l1-k0": "n1"}, reason="placed"), at=T0 + at(100))
    log.add(
        "n1", ResourcesAllocated(kernel_id="l1-k0", session_id="l1", slots=GPU), at=T0 + at(100)
    )
    report = waits(log, "h2", 0.92, 0.92, 0.84).report()
    assert [v.rule for v in report.violations] == ([] if ok else ["fair-share"])
    assert (report.fair_shares, report.fair_shares_unchecked) == (2 if ok else 1, 0)
