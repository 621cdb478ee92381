"""A replica's health, from its probes: the state machine the controller runs on every pass.

- a passing probe makes it HEALTHY (a PROVISIONING replica becomes RUNNING and ACTIVE);
- ``failures`` failed probes in a row make a HEALTHY one UNHEALTHY (out of the rotation);
- a replica that stayed UNHEALTHY ``replace_after_s`` is retired (and so replaced);
- a replica never healthy ``warmup_s`` after its session started running ends FAILED, with
  the probe's last answer as the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from commands.serving.replicas import Replica
from schemas.serving import HealthCheck, ReplicaHealth, ReplicaLifecycle


@dataclass(frozen=True, slots=True)
class Probe:
    """What the probes of one replica said so far (kept in memory by the controller)."""

    ok: bool
    """The last probe passed."""
    answer: str
    """The last probe's answer: ``GET /health: 200``, ``connection refused``..."""
    failures: int = 0
    """Failed probes in a row (0 after a pass)."""


class Verdict(StrEnum):
    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    NEVER_HEALTHY = "never-healthy"
    """End it FAILED: it did not pass a probe within its warm-up."""
    REPLACE = "replace"
    """Retire it: unhealthy for too long."""


@dataclass(frozen=True, slots=True)
class Judgement:
    verdict: Verdict
    reason: str


def judge(
    replica: Replica,
    check: HealthCheck,
    probe: Probe | None,
    running_since: datetime | None,
    now: datetime,
) -> Judgement | None:
    """What to record about ``replica`` now, if anything. ``running_since``: when its session
    started running (None: not yet, and then nothing counts against it)."""
    if not replica.live:
        return None
    if probe is not None and probe.ok:
        if replica.health is not ReplicaHealth.HEALTHY:
            return Judgement(Verdict.HEALTHY, probe.answer)
        return None
    if (
        probe is not None
        and replica.health is ReplicaHealth.HEALTHY
        and probe.failures >= check.failures
    ):
        return Judgement(
            Verdict.UNHEALTHY, f"{probe.failures} probes failed in a row: {probe.answer}"
        )
    if replica.health is ReplicaHealth.UNHEALTHY:
        unhealthy_s = (now - replica.health_since).total_seconds()
        if unhealthy_s >= check.replace_after_s:
            last = f": {probe.answer}" if probe is not None else ""
            return Judgement(
                Verdict.REPLACE, f"unhealthy for {unhealthy_s:.0f}s (replaced after "
                f"{check.replace_after_s:g}s){last}",
            )  # fmt: skip
        return None
    if replica.lifecycle is ReplicaLifecycle.PROVISIONING and running_since is not None:
        waited = (now - running_since).total_seconds()
        if waited >= check.warmup_s:
            last = probe.answer if probe is not None else "no probe answered (no address)"
            return Judgement(
                Verdict.NEVER_HEALTHY,
                f"never healthy within its {check.warmup_s:g}s warm-up; last probe: {last}",
            )
    return None
