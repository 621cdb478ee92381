"""How many replicas to ask for and which to retire, in steady state and while rolling to a
new revision (one rule for both: in steady state every replica runs the target revision).

- Replicas of the target revision are asked for until there are ``desired`` of them, never
  more than ``desired + max_surge`` live in all.
- Replicas of older revisions are retired as the new ones turn healthy, keeping at least
  ``desired - max_unavailable`` healthy: those not healthy first (they serve nothing), then
  the healthy ones, oldest revision first.
- Target-revision replicas beyond ``desired`` (a scale-in) are retired, those not serving
  first, the newest first.
- After replicas of the target revision failed in a row (ended FAILED, never healthy), the
  next one is asked for only ``BACKOFF_BASE_S * 2**(failures - 1)`` after the last failure
  (at most ``BACKOFF_MAX_S``): a model that cannot start, or a create the scheduler refuses,
  does not spin.
- The rollout is finished when no older replica is left and ``desired`` target replicas are
  healthy; it is rolled back when ``failed_replicas`` of the target's replicas ended FAILED
  and none of them ever became healthy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from commands.serving.aggregate import Endpoint
from commands.serving.replicas import Replica
from schemas.serving import ReplicaLifecycle

BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 300.0


@dataclass(frozen=True, slots=True)
class Moves:
    request: int = 0
    """Target-revision replicas to ask for."""
    retire: tuple[tuple[int, str], ...] = field(default=())
    """(replica number, reason) to retire."""


def _retire_order(replica: Replica) -> tuple[bool, int]:
    # Not serving first; among equals, the newest first.
    return (replica.serving, -replica.number)


def asks_resume_at(endpoint: Endpoint, revision: int) -> datetime | None:
    """When replicas of ``revision`` may be asked for again after failures in a row (None:
    no failure streak)."""
    ended = sorted(
        (r for r in endpoint.replicas.values() if r.revision == revision and r.ended_at),
        key=lambda r: r.number, reverse=True,
    )  # fmt: skip
    streak = 0
    for replica in ended:
        if replica.lifecycle is not ReplicaLifecycle.FAILED or replica.ever_healthy:
            break
        streak += 1
    if streak == 0 or ended[0].ended_at is None:
        return None
    wait = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2 ** (streak - 1))
    return ended[0].ended_at + timedelta(seconds=wait)


def moves(endpoint: Endpoint, now: datetime) -> Moves:
    """The asks and retirements that bring the live replicas towards the desired ones."""
    desired, target = endpoint.desired, endpoint.target_revision
    live = endpoint.live
    new = [r for r in live if r.revision == target]
    old = [r for r in live if r.revision != target]
    retire: list[tuple[int, str]] = []
    healthy = sum(1 for r in live if r.serving)
    floor = max(0, desired - endpoint.rollout.max_unavailable)
    # Older replicas: the idle ones cost no availability; the serving ones as the floor allows.
    for replica in sorted(old, key=lambda r: (r.serving, r.revision, r.number)):
        if replica.serving:
            if healthy - 1 < floor:
                break
            healthy -= 1
        retire.append((replica.number, f"revision {replica.revision} replaced by {target}"))
    old_left = len(old) - len(retire)
    # Newer replicas beyond the desired count: a scale-in.
    extra = len(new) - desired
    for replica in sorted(new, key=_retire_order)[: max(0, extra)]:
        retire.append((replica.number, f"scaled in to {desired} replicas"))
    new_left = len(new) - max(0, extra)
    room = desired + endpoint.rollout.max_surge - (old_left + new_left)
    request = max(0, min(desired - new_left, room))
    resume = asks_resume_at(endpoint, target)
    if resume is not None and now < resume:
        request = 0
    return Moves(request=request, retire=tuple(retire))


def rollout_finished(endpoint: Endpoint) -> bool:
    if not endpoint.rolling:
        return False
    live = endpoint.live
    if any(r.revision != endpoint.target_revision for r in live):
        return False
    return sum(1 for r in live if r.serving) >= endpoint.desired


def rollback_reason(endpoint: Endpoint) -> str | None:
    """Why the target revision is rolled back (the last failure's reason), or None."""
    if not endpoint.rolling:
        return None
    ours = [r for r in endpoint.replicas.values() if r.revision == endpoint.target_revision]
    if any(r.ever_healthy for r in ours):
        return None
    failed = [r for r in ours if r.lifecycle is ReplicaLifecycle.FAILED]
    if len(failed) < endpoint.rollout.failed_replicas:
        return None
    last = max(failed, key=lambda r: r.number)
    return (
        f"revision {endpoint.target_revision} never became healthy ({len(failed)} replicas "
        f"failed): {last.reason}"
    )
