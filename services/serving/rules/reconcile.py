"""One reconcile step on an endpoint (a working copy, pure): what its replicas' sessions and
probes say, then the rollback check, destruction, autoscaling, and the asks and retirements
that bring its replicas to the desired count and revision. Every change is an event on the
endpoint with its reason; ``wanted`` then says which session commands follow from the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from commands.serving.aggregate import Endpoint
from commands.serving.replicas import Replica
from schemas.ids import session_id_for
from schemas.serving import ReplicaHealth, ScaleSource, replica_command_id
from services.serving.rules import rollout, scaling
from services.serving.rules.health import Probe, Verdict, judge


class Phase(StrEnum):
    PENDING = "pending"
    """Asked for, not running yet (queued, placed, pulling, creating)."""
    RUNNING = "running"
    ENDED = "ended"


@dataclass(frozen=True, slots=True)
class SessionFact:
    """A replica's session as the log says."""

    phase: Phase
    reason: str = ""
    started_at: datetime | None = None
    could_not_start: bool = False
    """It ended in ERROR or was cancelled before it ever ran."""


@dataclass(frozen=True, slots=True)
class Facts:
    """What the controller knows of an endpoint's replicas besides the log of the endpoint."""

    sessions: Mapping[int, SessionFact] = field(default_factory=dict)
    """Replica number -> its session (absent: not seen on the log yet)."""
    refused: Mapping[int, str] = field(default_factory=dict)
    """Replica number -> why the scheduler refused its session's create."""
    uncreated: frozenset[int] = frozenset()
    """Retired replicas whose create has no outcome: no session will come for them."""
    probes: Mapping[int, Probe] = field(default_factory=dict)
    metrics: Mapping[int, float | None] = field(default_factory=dict)
    """Scaling rule index -> its metric over its window now (None: not measured)."""


def replica_session_id(endpoint: Endpoint, number: int) -> str:
    return session_id_for(replica_command_id(endpoint.id, endpoint.incarnation, number))


def reconcile(endpoint: Endpoint, facts: Facts, now: datetime) -> None:
    """Decide on ``endpoint`` (a working copy): its pending events are the decision."""
    if endpoint.destroyed:
        return
    for replica in endpoint.unended:
        _follow_session(endpoint, replica, facts, now)
    for replica in endpoint.live:
        _judge_health(endpoint, replica, facts, now)
    if endpoint.destroying:
        for replica in endpoint.live:
            endpoint.retire(replica.number, "the endpoint is being destroyed", now)
        if not endpoint.unended:
            endpoint.finish_destroy(now)
        return
    reason = rollout.rollback_reason(endpoint)
    if reason is not None:
        endpoint.roll_back(reason, now)
    decided = scaling.decide(
        endpoint.scaling, endpoint.desired, facts.metrics, endpoint.rule_scaled_at, now,
        endpoint.scaled_at,
    )  # fmt: skip
    if decided is not None:
        endpoint.scale(
            decided.replicas, ScaleSource.RULE, decided.reason, now,
            rule=decided.rule, metric=decided.metric, value=decided.value,
        )  # fmt: skip
    moves = rollout.moves(endpoint, now)
    for number, why in moves.retire:
        endpoint.retire(number, why, now)
    target = endpoint.target_revision
    for _ in range(moves.request):
        number = endpoint.next_replica
        endpoint.request_replica(
            replica_session_id(endpoint, number), target,
            f"revision {target}: {len(endpoint.live)} of {endpoint.desired} replicas live", now,
        )  # fmt: skip
    if rollout.rollout_finished(endpoint):
        endpoint.finish_rollout(now)


def _follow_session(endpoint: Endpoint, replica: Replica, facts: Facts, now: datetime) -> None:
    number = replica.number
    refused = facts.refused.get(number)
    if refused is not None:
        endpoint.end_replica(number, True, f"its session could not be created: {refused}", now)
        return
    session = facts.sessions.get(number)
    if session is None and not replica.live and number in facts.uncreated:
        endpoint.end_replica(number, False, "retired before its session was created", now)
        return
    if session is None or session.phase is not Phase.ENDED:
        return
    if not replica.live:  # retired: however its session ended, nothing failed
        endpoint.end_replica(number, False, f"retired; its session ended: {session.reason}", now)
    elif session.could_not_start and not replica.ever_healthy:
        endpoint.end_replica(number, True, f"its session could not start: {session.reason}", now)
    else:
        endpoint.end_replica(number, False, f"its session ended: {session.reason}", now)


def _judge_health(endpoint: Endpoint, replica: Replica, facts: Facts, now: datetime) -> None:
    session = facts.sessions.get(replica.number)
    if session is None or session.phase is not Phase.RUNNING:
        return
    check = endpoint.revisions[replica.revision].health
    found = judge(replica, check, facts.probes.get(replica.number), session.started_at, now)
    if found is None:
        return
    number = replica.number
    if found.verdict is Verdict.HEALTHY:
        endpoint.health_changed(number, ReplicaHealth.HEALTHY, found.reason, now)
    elif found.verdict is Verdict.UNHEALTHY:
        endpoint.health_changed(number, ReplicaHealth.UNHEALTHY, found.reason, now)
    elif found.verdict is Verdict.REPLACE:
        endpoint.retire(number, found.reason, now)
    else:
        endpoint.end_replica(number, True, found.reason, now)


DRAIN_SETTLE_S = 1.5
"""How long after a retirement the proxies' in-flight counts are trusted: they fold the
retirement (and stop routing to it) at once, and report every second."""


def drained(replica: Replica, inflight: int | None, now: datetime, timeout_s: float) -> bool:
    """Whether a retired replica's session may be ended: it never served, or the proxies had
    time to take it out of their rotation and report none of its requests in flight (or no
    proxy reports at all), or it has drained ``timeout_s`` already."""
    if not replica.ever_healthy or replica.retired_at is None:
        return True
    waited = (now - replica.retired_at).total_seconds()
    return waited >= timeout_s or (waited >= DRAIN_SETTLE_S and not inflight)


class Wanted(StrEnum):
    CREATE = "create"
    TERMINATE = "terminate"


def wanted(endpoint: Endpoint, facts: Facts) -> list[tuple[Wanted, Replica]]:
    """The session commands the state calls for: a create for each live replica whose session
    the log has not shown (sent again until it does: the id makes it the same session), a
    terminate for each retired or ended replica whose session still runs."""
    found: list[tuple[Wanted, Replica]] = []
    for replica in endpoint.replicas.values():
        session = facts.sessions.get(replica.number)
        if replica.live:
            if session is None and replica.number not in facts.refused:
                found.append((Wanted.CREATE, replica))
        elif session is not None and session.phase is not Phase.ENDED:
            found.append((Wanted.TERMINATE, replica))
    return found
