"""Autoscaling: the endpoint's rules, in order, against the metrics as measured now.

A rule whose metric is above ``scale_up_above`` asks for ``step`` more replicas; below
``scale_down_below``, ``step`` fewer. The result is clamped into the endpoint's min and max:
a step that would pass a bound stops at it (never skipped), and a rule at its bound asks for
nothing. A rule that scaled the endpoint waits ``cooldown_s`` before it scales again. The first
rule that changes the count decides; each decision says which rule, metric and value.

A rule scales down only once its window has passed since the count last changed (by any
cause): until then its metric still averages over the old count, or over the quiet before a
wake (a request held for a cold start must not see its endpoint scaled back to zero).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from schemas.serving import Scaling, ScalingMetric


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    replicas: int
    rule: int
    metric: ScalingMetric
    value: float
    reason: str


def decide(
    scaling: Scaling,
    desired: int,
    values: Mapping[int, float | None],
    last_scaled: Mapping[int, datetime],
    now: datetime,
    changed_at: datetime | None = None,
) -> ScaleDecision | None:
    """The first rule's change of the desired count, or None. ``values``: rule index -> its
    metric over its window, measured now (None: not measured, and the rule waits)."""
    for index, rule in enumerate(scaling.rules):
        value = values.get(index)
        if value is None:
            continue
        last = last_scaled.get(index)
        if last is not None and (now - last).total_seconds() < rule.cooldown_s:
            continue
        up, down = rule.scale_up_above, rule.scale_down_below
        if up is not None and value > up:
            target, crossed = desired + rule.step, f"above {up:g}"
        elif down is not None and value < down and _settled(changed_at, rule.window_s, now):
            target, crossed = desired - rule.step, f"below {down:g}"
        else:
            continue
        clamped = scaling.clamp(target)
        if clamped == desired:
            continue  # at its bound already
        bound = "" if clamped == target else f" (clamped from {target})"
        reason = (
            f"rule {index}: {rule.metric.value} {value:.3g} is {crossed}: "
            f"{desired} -> {clamped} replicas{bound}"
        )
        return ScaleDecision(clamped, index, rule.metric, value, reason)
    return None


def _settled(changed_at: datetime | None, window_s: float, now: datetime) -> bool:
    return changed_at is None or (now - changed_at).total_seconds() >= window_s
