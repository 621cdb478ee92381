"""The serving controller's pure rules: autoscaling (thresholds, step, clamp, cooldown),
the health state machine, rollout steps and rollback, and one reconcile step on a real
endpoint aggregate from the facts of its sessions and probes; the load board's rates."""

from __future__ import annotations

import json

from commands.serving.aggregate import Endpoint
from events.domain.serving import (
    EndpointCreated,
    EndpointRevisionAdded,
    EndpointRolledBack,
    EndpointRolloutFinished,
    EndpointScaled,
    ReplicaEnded,
    ReplicaHealthChanged,
    ReplicaRequested,
    ReplicaRetired,
)
from schemas.activity import ActivitySource
from schemas.ids import session_id_for
from schemas.resources import ResourceSlots
from schemas.serving import (
    HealthCheck,
    ReplicaHealth,
    Revision,
    Rollout,
    Scaling,
    ScalingMetric,
    ScalingRule,
    replica_command_id,
)
from schemas.serving_load import LoadBoard
from schemas.tenancy import SessionOwner
from services.serving.load import mean_use
from services.serving.rules import rollout, scaling
from services.serving.rules.health import Probe, Verdict, judge
from services.serving.rules.reconcile import (
    Facts,
    Phase,
    SessionFact,
    Wanted,
    drained,
    reconcile,
    wanted,
)
from tests.unit.scenario import T0, at, given, then

OWNER = SessionOwner(access_key="AK", user_id="u1", project_id="p1", domain="default")
CHECK = HealthCheck(interval_s=1, failures=2, warmup_s=30, replace_after_s=10)
SPEC = Revision(image="echo:1", port=8000, resources=ResourceSlots.of(cpu=1), health=CHECK)
SPEC2 = SPEC.model_copy(update={"image": "echo:2"})
RPS = ScalingRule(metric=ScalingMetric.RPS, scale_up_above=10, scale_down_below=2, step=2,
                  cooldown_s=60)  # fmt: skip
SCALING = Scaling(min_replicas=1, max_replicas=5, rules=(RPS,))
OK = Probe(True, "GET /health: 200")
DOWN = Probe(False, "GET /health: 503 Service Unavailable", failures=2)
RUNNING = SessionFact(Phase.RUNNING, "started", started_at=T0)


def endpoint(*events: object, replicas: int = 2, rollout_: Rollout | None = None) -> Endpoint:
    created = EndpointCreated(
        name="echo", owner=OWNER, spec=SPEC, replicas=replicas, scaling=SCALING,
        rollout=rollout_ or Rollout(),
    )  # fmt: skip
    return given(Endpoint, "ep", created, *events)  # type: ignore[arg-type]


def asked(n: int, revision: int = 1) -> ReplicaRequested:
    return ReplicaRequested(replica=n, revision=revision, session_id=f"s{n}")


def healthy(n: int) -> ReplicaHealthChanged:
    return ReplicaHealthChanged(replica=n, health=ReplicaHealth.HEALTHY, reason="ok")


# ---- scaling -----------------------------------------------------------------------------


def test_a_rule_above_its_threshold_steps_up_and_says_why() -> None:
    found = scaling.decide(SCALING, 2, {0: 12.5}, {}, T0)
    assert found is not None
    assert (found.replicas, found.rule, found.metric, found.value) == (
        4,
        0,
        ScalingMetric.RPS,
        12.5,
    )
    assert "rps 12.5 is above 10" in found.reason


def test_a_step_past_a_bound_is_clamped_not_skipped() -> None:
    found = scaling.decide(SCALING, 4, {0: 50.0}, {}, T0)
    assert found is not None and found.replicas == 5 and "clamped from 6" in found.reason
    assert scaling.decide(SCALING, 5, {0: 50.0}, {}, T0) is None  # at max: nothing to do
    down = scaling.decide(SCALING, 2, {0: 0.0}, {}, T0)
    assert down is not None and down.replicas == 1  # min 1, not 0


def test_a_rule_waits_its_cooldown_and_an_unmeasured_rule_waits() -> None:
    assert scaling.decide(SCALING, 2, {0: 50.0}, {0: at(0)}, at(59)) is None
    assert scaling.decide(SCALING, 2, {0: 50.0}, {0: at(0)}, at(60)) is not None
    assert scaling.decide(SCALING, 2, {0: None}, {}, T0) is None
    assert scaling.decide(SCALING, 2, {0: 5.0}, {}, T0) is None  # between the thresholds


def test_a_rule_scales_down_only_once_its_window_covers_the_new_count() -> None:
    quiet = ScalingRule(metric=ScalingMetric.RPS, scale_down_below=1, window_s=30, cooldown_s=0)
    rules = Scaling(min_replicas=0, max_replicas=3, rules=(quiet,))
    woken = at(100)  # a wake: 0 -> 1, while the first request waits for the replica
    assert scaling.decide(rules, 1, {0: 0.0}, {}, at(129), woken) is None
    found = scaling.decide(rules, 1, {0: 0.0}, {}, at(130), woken)
    assert found is not None and found.replicas == 0


def test_the_first_rule_that_changes_the_count_decides() -> None:
    cpu = ScalingRule(metric=ScalingMetric.CPU, scale_up_above=80, step=1, cooldown_s=0)
    rules = Scaling(min_replicas=0, max_replicas=5, rules=(RPS, cpu))
    found = scaling.decide(rules, 3, {0: 5.0, 1: 95.0}, {}, T0)
    assert found is not None and (found.rule, found.replicas) == (1, 4)


# ---- health ------------------------------------------------------------------------------


def test_health_state_machine() -> None:
    ep = endpoint(asked(1), asked(2), healthy(2))
    new, up = ep.replicas[1], ep.replicas[2]
    passed = judge(new, CHECK, OK, T0, at(1))
    assert passed is not None and passed.verdict is Verdict.HEALTHY
    assert judge(up, CHECK, OK, T0, at(1)) is None
    once = Probe(False, "GET /health: 503", failures=1)
    assert judge(up, CHECK, once, T0, at(1)) is None  # one failure is not enough
    down = judge(up, CHECK, DOWN, T0, at(1))
    assert down is not None and down.verdict is Verdict.UNHEALTHY and "503" in down.reason
    # a provisioning replica failing its probes waits out its warm-up, then fails with them
    assert judge(new, CHECK, DOWN, T0, at(29)) is None
    never = judge(new, CHECK, DOWN, T0, at(30))
    assert never is not None and never.verdict is Verdict.NEVER_HEALTHY
    assert "30s warm-up; last probe: GET /health: 503 Service Unavailable" in never.reason
    assert judge(new, CHECK, None, None, at(999)) is None  # not running yet: no clock


def test_an_unhealthy_replica_is_replaced_after_replace_after_s() -> None:
    ep = endpoint(asked(1), healthy(1))
    ep.health_changed(1, ReplicaHealth.UNHEALTHY, "down", at(100))
    sick = ep.replicas[1]
    assert judge(sick, CHECK, DOWN, T0, at(109)) is None
    replace = judge(sick, CHECK, DOWN, T0, at(110))
    assert replace is not None and replace.verdict is Verdict.REPLACE


# ---- rollout -----------------------------------------------------------------------------


def test_a_new_endpoint_asks_for_its_desired_replicas() -> None:
    assert rollout.moves(endpoint(), T0) == rollout.Moves(request=2)


def test_scale_in_retires_the_replicas_not_serving_first() -> None:
    ep = endpoint(asked(1), asked(2), asked(3), healthy(1), healthy(3), replicas=1)
    moves = rollout.moves(ep, T0)
    assert [n for n, _ in moves.retire] == [2, 3] and moves.request == 0


def test_a_rollout_surges_then_retires_old_replicas_as_new_ones_turn_healthy() -> None:
    ep = endpoint(asked(1), asked(2), healthy(1), healthy(2),
                  EndpointRevisionAdded(revision=2, spec=SPEC2))  # fmt: skip
    assert rollout.moves(ep, T0) == rollout.Moves(request=1)  # max_surge 1, max_unavailable 0
    ep = endpoint(asked(1), asked(2), healthy(1), healthy(2),
                  EndpointRevisionAdded(revision=2, spec=SPEC2), asked(3, 2))  # fmt: skip
    assert rollout.moves(ep, T0) == rollout.Moves()  # the new one is not healthy: wait
    ep.health_changed(3, ReplicaHealth.HEALTHY, "ok", at(5))
    moves = rollout.moves(ep, T0)
    assert [n for n, _ in moves.retire] == [1] and moves.request == 1
    assert not rollout.rollout_finished(ep)


def test_max_unavailable_lets_a_rollout_move_without_surge() -> None:
    ep = endpoint(asked(1), asked(2), healthy(1), healthy(2),
                  EndpointRevisionAdded(revision=2, spec=SPEC2),
                  rollout_=Rollout(max_surge=0, max_unavailable=1))  # fmt: skip
    moves = rollout.moves(ep, T0)
    assert len(moves.retire) == 1 and moves.request == 1


def test_asks_back_off_after_failures_in_a_row() -> None:
    failed = [asked(1), ReplicaEnded(replica=1, failed=True, reason="refused")]
    ep = endpoint(*failed, replicas=1)  # ended at at(2): the given events are 1 s apart
    assert rollout.moves(ep, at(3)).request == 0
    assert rollout.moves(ep, at(4)).request == 1  # 2 s after one failure
    ep = endpoint(*failed, asked(2), ReplicaEnded(replica=2, failed=True, reason="x"),
                  replicas=1)  # fmt: skip
    assert rollout.asks_resume_at(ep, 1) == at(4 + 4)  # 4 s after two
    ep = endpoint(*failed, asked(2), healthy(2), ReplicaEnded(replica=2, failed=True,
                                                              reason="x"), replicas=1)  # fmt: skip
    assert rollout.asks_resume_at(ep, 1) is None  # it had served: no streak


def test_a_revision_never_healthy_is_rolled_back_with_the_last_answer() -> None:
    events = [asked(1), healthy(1), EndpointRevisionAdded(revision=2, spec=SPEC2),
              asked(2, 2), ReplicaEnded(replica=2, failed=True, reason="warm-up: 503")]  # fmt: skip
    assert rollout.rollback_reason(endpoint(*events, replicas=1)) is None  # 1 of 2 failed
    events += [asked(3, 2), ReplicaEnded(replica=3, failed=True, reason="warm-up: 500 boom")]
    reason = rollout.rollback_reason(endpoint(*events, replicas=1))
    assert reason is not None and "revision 2 never became healthy" in reason
    assert reason.endswith("warm-up: 500 boom")


# ---- a reconcile step --------------------------------------------------------------------


def test_reconcile_asks_for_replicas_then_records_health_and_finishes_a_rollout() -> None:
    ep = endpoint(replicas=1)
    reconcile(ep, Facts(), T0)
    (requested,) = then(ep)
    assert isinstance(requested, ReplicaRequested) and requested.replica == 1
    assert wanted(ep, Facts()) == [(Wanted.CREATE, ep.replicas[1])]
    facts = Facts(sessions={1: RUNNING}, probes={1: OK})
    reconcile(ep, facts, at(1))
    assert then(ep) == [healthy(1).model_copy(update={"reason": OK.answer})]
    ep.add_revision(SPEC2, "v2", at(2))
    then(ep)
    reconcile(ep, facts, at(3))
    assert [type(e) for e in then(ep)] == [ReplicaRequested]
    facts = Facts(sessions={1: RUNNING, 2: RUNNING}, probes={1: OK, 2: OK})
    reconcile(ep, facts, at(4))
    assert [type(e) for e in then(ep)] == [
        ReplicaHealthChanged, ReplicaRetired, EndpointRolloutFinished,
    ]  # fmt: skip
    assert wanted(ep, facts) == [(Wanted.TERMINATE, ep.replicas[1])]


def test_reconcile_replaces_a_replica_whose_session_ended() -> None:
    ep = endpoint(asked(1), healthy(1), replicas=1)
    lost = SessionFact(Phase.ENDED, "node lost", started_at=T0, could_not_start=False)
    reconcile(ep, Facts(sessions={1: lost}), at(5))
    ended, requested = then(ep)
    assert ended == ReplicaEnded(replica=1, failed=False, reason="its session ended: node lost")
    assert isinstance(requested, ReplicaRequested) and requested.replica == 2


def test_reconcile_fails_a_never_healthy_replica_and_rolls_back() -> None:
    ep = endpoint(asked(1), healthy(1), EndpointRevisionAdded(revision=2, spec=SPEC2),
                  asked(2, 2), ReplicaEnded(replica=2, failed=True, reason="first"),
                  asked(3, 2), replicas=1)  # fmt: skip
    facts = Facts(sessions={1: RUNNING, 3: RUNNING}, probes={1: OK, 3: DOWN})
    reconcile(ep, facts, at(30))
    decided = then(ep)
    assert isinstance(decided[0], ReplicaEnded) and decided[0].failed
    assert isinstance(decided[1], EndpointRolledBack)
    assert (decided[1].revision, decided[1].to_revision) == (2, 1)
    assert "503 Service Unavailable" in decided[1].reason
    assert ep.target_revision == ep.current_revision == 1
    assert wanted(ep, facts) == [(Wanted.TERMINATE, ep.replicas[3])]


def test_a_retired_replica_whose_session_was_cancelled_did_not_fail() -> None:
    ep = endpoint(asked(1), asked(2), ReplicaRetired(replica=2, reason="scaled in"), replicas=1)
    cancelled = SessionFact(Phase.ENDED, "cancelled", could_not_start=True)
    pending = SessionFact(Phase.PENDING)
    reconcile(ep, Facts(sessions={1: pending, 2: cancelled}), at(5))
    assert then(ep) == [
        ReplicaEnded(replica=2, failed=False, reason="retired; its session ended: cancelled")
    ]
    failed = SessionFact(Phase.ENDED, "image pull failed", could_not_start=True)
    reconcile(ep, Facts(sessions={1: failed}), at(6))
    assert then(ep)[0] == ReplicaEnded(
        replica=1, failed=True, reason="its session could not start: image pull failed"
    )


def test_reconcile_ends_a_replica_whose_create_was_refused() -> None:
    ep = endpoint(asked(1), replicas=1)
    refused = Facts(refused={1: "image unknown"})
    reconcile(ep, refused, at(1))
    assert then(ep) == [
        ReplicaEnded(
            replica=1, failed=True, reason="its session could not be created: image unknown"
        )
    ]
    reconcile(ep, refused, at(2))
    assert then(ep) == []  # the next ask backs off (2 s after one failure)
    reconcile(ep, refused, at(3))
    assert [type(e) for e in then(ep)] == [ReplicaRequested]


def test_reconcile_scales_by_a_rule_and_records_the_decision() -> None:
    ep = endpoint(asked(1), asked(2), healthy(1), healthy(2))
    facts = Facts(sessions={1: RUNNING, 2: RUNNING}, probes={1: OK, 2: OK}, metrics={0: 20.0})
    reconcile(ep, facts, at(1))
    scaled, *requested = then(ep)
    assert isinstance(scaled, EndpointScaled) and (scaled.replicas, scaled.rule) == (4, 0)
    assert len(requested) == 2


def test_destroying_retires_every_replica_and_ends_once_they_ended() -> None:
    ep = endpoint(asked(1), healthy(1), replicas=1)
    ep.request_destroy("bye", at(1))
    then(ep)
    reconcile(ep, Facts(sessions={1: RUNNING}), at(2))
    assert [type(e) for e in then(ep)] == [ReplicaRetired]
    ended = SessionFact(Phase.ENDED, "terminated", started_at=T0)
    reconcile(ep, Facts(sessions={1: ended}), at(3))
    assert [type(e).__name__ for e in then(ep)] == ["ReplicaEnded", "EndpointDestroyed"]


# ---- metrics -----------------------------------------------------------------------------


def report(at_: float, requests: int, inflight: int = 0, proxy: str = "p1") -> bytes:
    return json.dumps({"proxy": proxy, "at": at_, "endpoints": {
        "ep": {"requests": requests, "inflight": inflight, "replicas": {}}}}).encode()  # fmt: skip


def test_load_board_rates_over_the_window_across_proxies_and_restarts() -> None:
    now = [1000.0]
    board = LoadBoard(lambda: now[0])
    assert board.rate("ep", 30) is None  # no proxy: not measured
    for i in range(11):
        now[0] = 1000 + i
        board.take(report(1000 + i, 20 * i, inflight=3))
    board.take(report(1010, 5, proxy="p2"))
    now[0] = 1011
    board.take(report(1011, 15, proxy="p2"))  # 10 requests in 1 s
    assert board.rate("ep", 5) == 20 + 10
    assert board.inflight("ep") == 3
    assert board.rate("other", 5) == 0
    now[0] = 1012
    board.take(report(1012, 4, proxy="p2"))  # restarted: its total went down
    assert board.rate("ep", 1) == 20 + 4
    now[0] = 1018  # p1 silent since 1010, p2 since 1012: both gone
    assert board.rate("ep", 5) is None


def test_mean_use_counts_a_replica_without_reports_as_idle() -> None:
    busy = [(at(10), ActivitySource.CPU, 90.0), (at(20), ActivitySource.CPU, 70.0),
            (at(20), ActivitySource.GPU, 10.0)]  # fmt: skip
    assert mean_use([busy, []], ActivitySource.CPU, 30, at(25)) == 40.0
    assert mean_use([busy], ActivitySource.CPU, 10, at(25)) == 70.0
    assert mean_use([], ActivitySource.CPU, 10, at(25)) is None


def test_a_retired_replica_that_served_is_drained_before_its_session_ends() -> None:
    ep = endpoint(asked(1), asked(2), healthy(1), replicas=2)
    ep.retire(1, "scaled in", at(10))
    ep.retire(2, "scaled in", at(10))
    served, never = ep.replicas[1], ep.replicas[2]
    assert drained(never, 3, at(10), timeout_s=30)  # it never took traffic
    assert not drained(served, 0, at(11), timeout_s=30)  # the proxies may not have folded it
    assert not drained(served, 2, at(12), timeout_s=30)  # two requests still being answered
    assert drained(served, 0, at(12), timeout_s=30)
    assert drained(served, None, at(12), timeout_s=30)  # no proxy reports: nothing to wait for
    assert drained(served, 2, at(40), timeout_s=30)  # the drain timeout


def test_a_replicas_session_is_its_endpoints_incarnation_and_number() -> None:
    # Two endpoints of one name (two installations on one container engine, or one made again)
    # never ask for the same session: containers are named after their kernels.
    sessions = []
    for made_by in ("cmd-a", "cmd-b"):
        created = EndpointCreated(
            name="echo", owner=OWNER, spec=SPEC, replicas=1, scaling=SCALING,
            incarnation=made_by,
        )  # fmt: skip
        ep: Endpoint = given(Endpoint, "ep", created)
        reconcile(ep, Facts(), T0)
        (requested,) = then(ep)
        assert isinstance(requested, ReplicaRequested)
        assert requested.session_id == session_id_for(replica_command_id("ep", made_by, 1))
        sessions.append(requested.session_id)
    assert sessions[0] != sessions[1]
