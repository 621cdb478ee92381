"""The endpoint aggregate: creating and re-creating, scaling (clamped), modifying bounds,
revisions, replicas' three states, tokens (revoked stays revoked), destruction; as
given-events / when-command / then-events, and through the log and a snapshot unchanged."""

from __future__ import annotations

from datetime import timedelta

import pytest

from commands.errors import DomainError
from commands.serving.aggregate import (
    Endpoint,
    EndpointExistsError,
    EndpointGoneError,
    TokenError,
)
from events.domain.serving import (
    EndpointCreated,
    EndpointDestroyed,
    EndpointDestroyRequested,
    EndpointModified,
    EndpointRecreated,
    EndpointRevisionAdded,
    EndpointScaled,
    EndpointTokenIssued,
    EndpointTokenRevoked,
    ReplicaEnded,
    ReplicaHealthChanged,
    ReplicaRequested,
    ReplicaRetired,
)
from schemas.resources import ResourceSlots
from schemas.serving import (
    EndpointStatus,
    ReplicaHealth,
    ReplicaLifecycle,
    ReplicaTraffic,
    Revision,
    Rollout,
    ScaleSource,
    Scaling,
)
from schemas.tenancy import SessionOwner
from tests.unit.scenario import T0, at, given, stream, then

EID = "ep-1"
OWNER = SessionOwner(access_key="AK", user_id="u1", project_id="p1", domain="default")
SPEC = Revision(image="echo:1", port=8000, resources=ResourceSlots.of(cpu=1, memory=1 << 30))
SPEC2 = SPEC.model_copy(update={"image": "echo:2"})
SCALING = Scaling(min_replicas=0, max_replicas=4)
CREATED = EndpointCreated(name="echo", owner=OWNER, spec=SPEC, replicas=2, scaling=SCALING)
NOW = at(100)


def endpoint(*events: object) -> Endpoint:
    return given(Endpoint, EID, CREATED, *events)  # type: ignore[arg-type]


def asked(n: int, revision: int = 1) -> ReplicaRequested:
    return ReplicaRequested(replica=n, revision=revision, session_id=f"s{n}")


def test_create_clamps_the_desired_count_and_starts_at_revision_one() -> None:
    made = Endpoint.create(EID, "echo", OWNER, SPEC, 9, SCALING, Rollout(), False, T0)
    assert then(made) == [CREATED.model_copy(update={"replicas": 4})]
    assert (made.current_revision, made.target_revision, made.desired) == (1, 1, 4)
    assert made.status() is EndpointStatus.UNAVAILABLE


def test_scale_is_clamped_and_a_scale_to_the_same_count_records_nothing() -> None:
    ep = endpoint()
    assert ep.scale(10, ScaleSource.MANUAL, "by u1", NOW)
    assert then(ep) == [
        EndpointScaled(replicas=4, previous=2, source=ScaleSource.MANUAL, reason="by u1")
    ]
    assert not ep.scale(4, ScaleSource.MANUAL, "again", NOW)
    assert then(ep) == []


def test_a_rule_scaling_starts_its_cooldown() -> None:
    ep = endpoint()
    ep.scale(3, ScaleSource.RULE, "rps", NOW, rule=1)
    assert ep.rule_scaled_at == {1: NOW} and ep.scaled_at == NOW


def test_modify_clamps_the_desired_count_into_new_bounds() -> None:
    ep = endpoint()
    tight = Scaling(min_replicas=0, max_replicas=1)
    assert ep.modify(tight, None, True, NOW)
    assert then(ep) == [
        EndpointModified(scaling=tight, rollout=Rollout(), open_to_public=True),
        EndpointScaled(
            replicas=1, previous=2, source=ScaleSource.BOUNDS,
            reason="clamped into the new bounds 0..1",
        ),
    ]  # fmt: skip
    assert not ep.modify(tight, None, True, NOW)


def test_a_revision_is_numbered_on_and_the_same_spec_again_is_no_change() -> None:
    ep = endpoint()
    assert ep.add_revision(SPEC2, "v2", NOW)
    assert then(ep) == [EndpointRevisionAdded(revision=2, spec=SPEC2, reason="v2")]
    assert ep.rolling and ep.target_revision == 2 and ep.current_revision == 1
    assert not ep.add_revision(SPEC2, "again", NOW)


def test_a_replica_keeps_lifecycle_health_and_traffic_apart() -> None:
    ep = endpoint(asked(1), asked(2))
    assert ep.replicas[1].lifecycle is ReplicaLifecycle.PROVISIONING
    ep.health_changed(1, ReplicaHealth.HEALTHY, "GET /health: 200", NOW)
    one = ep.replicas[1]
    assert (one.lifecycle, one.health, one.traffic) == (
        ReplicaLifecycle.RUNNING, ReplicaHealth.HEALTHY, ReplicaTraffic.ACTIVE,
    )  # fmt: skip
    assert ep.status() is EndpointStatus.DEGRADED  # 1 of 2 serving
    ep.health_changed(1, ReplicaHealth.UNHEALTHY, "GET /health: 503", NOW)
    one = ep.replicas[1]
    assert (one.lifecycle, one.traffic) == (ReplicaLifecycle.RUNNING, ReplicaTraffic.INACTIVE)
    assert ep.status() is EndpointStatus.UNAVAILABLE
    assert not ep.health_changed(1, ReplicaHealth.UNHEALTHY, "again", NOW)
    ep.retire(1, "unhealthy for 10s", NOW)
    ep.end_replica(1, False, "its session ended: killed", NOW)
    assert not ep.end_replica(1, True, "twice", NOW)
    assert [type(e) for e in then(ep)] == [
        ReplicaHealthChanged, ReplicaHealthChanged, ReplicaRetired, ReplicaEnded,
    ]  # fmt: skip
    assert ep.replica(1).lifecycle is ReplicaLifecycle.TERMINATED
    assert ep.next_replica == 3


def test_replica_numbers_are_never_reused() -> None:
    ep = endpoint(asked(1), ReplicaEnded(replica=1, failed=True, reason="x"))
    assert ep.request_replica("s2", 1, "more", NOW) == 2


def test_tokens_are_issued_once_and_a_revoked_token_revoked_again_answers_false() -> None:
    ep = endpoint()
    expires = NOW + timedelta(days=1)
    assert ep.issue_token("t1", "a" * 64, expires, "ci", NOW)
    assert not ep.issue_token("t1", "a" * 64, expires, "ci", NOW)
    with pytest.raises(TokenError, match="another secret"):
        ep.issue_token("t1", "b" * 64, expires, "ci", NOW)
    assert ep.token_valid("t1", "a" * 64, NOW)
    assert not ep.token_valid("t1", "a" * 64, expires)
    assert ep.revoke_token("t1", "leaked", NOW)
    assert not ep.revoke_token("t1", "leaked", NOW)
    assert not ep.token_valid("t1", "a" * 64, NOW)
    with pytest.raises(TokenError, match="no token"):
        ep.revoke_token("t9", "", NOW)
    assert then(ep) == [
        EndpointTokenIssued(token_id="t1", secret_sha256="a" * 64, expires_at=expires, note="ci"),
        EndpointTokenRevoked(token_id="t1", reason="leaked"),
    ]


def test_destroy_needs_every_replica_ended_and_then_the_name_may_be_used_again() -> None:
    ep = endpoint(asked(1), EndpointTokenIssued(token_id="t1", secret_sha256="a" * 64,
                                                expires_at=at(10**6)))  # fmt: skip
    assert ep.request_destroy("bye", NOW) and not ep.request_destroy("again", NOW)
    with pytest.raises(EndpointGoneError):
        ep.scale(1, ScaleSource.MANUAL, "", NOW)
    with pytest.raises(DomainError, match="not ended"):
        ep.finish_destroy(NOW)
    ep.retire(1, "destroyed", NOW)
    ep.end_replica(1, False, "ended", NOW)
    assert ep.finish_destroy(NOW)
    assert ep.status() is EndpointStatus.DESTROYED
    assert [type(e) for e in then(ep)] == [
        EndpointDestroyRequested, ReplicaRetired, ReplicaEnded, EndpointDestroyed,
    ]  # fmt: skip
    with pytest.raises(EndpointExistsError):
        endpoint().recreate("echo", OWNER, SPEC, 1, SCALING, Rollout(), False, NOW)
    ep.recreate("echo", OWNER, SPEC2, 1, SCALING, Rollout(), False, NOW)
    (remade,) = then(ep)
    assert isinstance(remade, EndpointRecreated) and remade.revision == 2
    assert (ep.destroyed, ep.desired, ep.next_replica) == (False, 1, 2)
    assert ep.tokens["t1"].revoked  # the old endpoint's tokens stay revoked


def test_the_log_and_a_snapshot_give_the_same_endpoint() -> None:
    events = [
        CREATED, asked(1), ReplicaHealthChanged(replica=1, health=ReplicaHealth.HEALTHY,
                                                reason="ok"),
        EndpointScaled(replicas=3, previous=2, source=ScaleSource.RULE, reason="r", rule=0),
        EndpointTokenIssued(token_id="t1", secret_sha256="a" * 64, expires_at=at(999)),
    ]  # fmt: skip
    rebuilt = Endpoint.rehydrate(stream(EID, *events))
    assert rebuilt is not None
    restored = Endpoint.from_snapshot(rebuilt.snapshot(seq=5, now=NOW))
    assert restored.state() == rebuilt.state()
    assert restored.replicas[1].serving and restored.rule_scaled_at == {0: at(3)}
