"""The endpoint mutations' GraphQL inputs, and turning them into the values the
``cmd.endpoint.*`` commands carry (``schemas.serving``'s ``Revision``, ``Scaling``,
``Rollout``): units parsed, fields left out keeping what the endpoint has, and every mistake an
``InputError`` naming its field. Pure."""

from __future__ import annotations

from typing import Any, TypeVar

import strawberry
from pydantic import BaseModel, ValidationError

from commands.messages import explain
from schemas.bounds import (
    DEFAULT_LIMITS,
    MEMORY_MIN_BYTES,
    BoundsError,
    InputLimits,
    cpu_milli,
    gpu_hundredths,
    memory_bytes,
)
from schemas.serving import HealthCheck, Revision, Rollout, Scaling, ScalingRule
from services.gateway.core.inputs import InputError

M = TypeVar("M", bound=BaseModel)


@strawberry.input
class EndpointEnvInput:
    name: str
    value: str


@strawberry.input
class HealthCheckInput:
    """How each replica is probed; a field left out takes its default."""

    path: str | None = strawberry.field(default=None, description="default /health")
    interval_s: float | None = strawberry.field(default=None, description="default 5")
    timeout_s: float | None = strawberry.field(default=None, description="default 2")
    failures: int | None = strawberry.field(
        default=None, description="failed probes in a row before unhealthy (default 3)"
    )
    warmup_s: float | None = strawberry.field(
        default=None, description="time to pass a first probe (default 300)"
    )
    expected_status: int | None = strawberry.field(default=None, description="default 200")
    replace_after_s: float | None = strawberry.field(
        default=None, description="an unhealthy replica is replaced after this (default 10)"
    )


@strawberry.input
class ScalingRuleInput:
    metric: str = strawberry.field(
        description="rps (per replica) | inflight (per replica) | cpu | gpu (percent)"
    )
    scale_up_above: float | None = None
    scale_down_below: float | None = None
    step: int = 1
    cooldown_s: float = 60.0
    window_s: float = 30.0


@strawberry.input
class RevisionInput:
    """What the replicas run. On create, left out: defaults (or the model folder's
    model-definition file); on update, left out: the endpoint's latest revision's value."""

    image: str | None = None
    command: list[str] | None = strawberry.field(
        default=None, description="the server's command; {model_path} is the model's mount path"
    )
    port: int | None = strawberry.field(default=None, description="the port it serves on")
    model: str | None = strawberry.field(
        default=None, description="the model's folder (name or id), mounted read-only"
    )
    model_mount: str | None = strawberry.field(default=None, description="default /models")
    model_version: str | None = None
    env: list[EndpointEnvInput] | None = None
    cpu: str | None = strawberry.field(default=None, description="cores per replica (default 1)")
    memory: str | None = strawberry.field(default=None, description="per replica (default 1g)")
    gpu: str | None = strawberry.field(default=None, description="per replica (default 0)")
    resource_group: str | None = None
    health: HealthCheckInput | None = None


@strawberry.input
class ScalingInput:
    """Replica bounds and rules; on modify, a field left out keeps its value."""

    min_replicas: int | None = None
    max_replicas: int | None = None
    rules: list[ScalingRuleInput] | None = strawberry.field(
        default=None, description="replaces every rule ([] removes them)"
    )
    cold_start_timeout_s: float | None = strawberry.field(
        default=None, description="how long a request waits for a first replica (default 120)"
    )
    max_surge: int | None = strawberry.field(
        default=None, description="rolling updates: replicas above desired (default 1)"
    )
    max_unavailable: int | None = strawberry.field(
        default=None, description="rolling updates: healthy replicas below desired (default 0)"
    )


def given(source: object, *names: str) -> dict[str, Any]:
    """The fields of an input that were given (not None)."""
    return {n: getattr(source, n) for n in names if getattr(source, n) is not None}


def validated(kind: type[M], data: dict[str, Any], where: str) -> M:
    """``data`` as ``kind``; its mistakes named as fields of ``where``."""
    try:
        return kind.model_validate(data)
    except ValidationError as exc:
        text = explain(exc)
        # A rule across fields (bounds, thresholds) has no field of its own: name the whole.
        named = text.replace("field '", f"field '{where}.")
        raise InputError(named if named != text else f"field '{where}': {text}") from None


def revision_of(
    spec: RevisionInput, *, base: dict[str, Any] | None, limits: InputLimits = DEFAULT_LIMITS
) -> Revision:
    """The revision ``spec`` asks for, on top of ``base``: the fields of an update's latest
    revision, or on create those a model definition gives."""
    data: dict[str, Any] = dict(base or {})
    data.update(given(spec, "image", "port", "model_mount", "model_version", "resource_group"))
    if spec.command is not None:
        data["command"] = tuple(spec.command)
    if spec.model is not None:
        data["model_folder"] = spec.model
    if spec.env is not None:
        data["env"] = {e.name: e.value for e in spec.env}
    if spec.health is not None:
        health = dict(data.get("health") or {})
        names = [n for n in HealthCheck.model_fields if hasattr(spec.health, n)]
        health.update(given(spec.health, *names))
        data["health"] = validated(HealthCheck, health, "health")
    data["resources"] = _resources(spec, base, limits)
    return validated(Revision, data, "revision")


def _resources(spec: RevisionInput, base: dict[str, Any] | None, limits: InputLimits) -> Any:
    kept = (base or {}).get("resources")
    if kept is not None and spec.cpu is None and spec.memory is None and spec.gpu is None:
        return kept
    try:
        return {
            "cpu_milli": cpu_milli(spec.cpu or "1", limits),
            "memory_bytes": memory_bytes(spec.memory or "1g", limits, least=MEMORY_MIN_BYTES),
            "gpu_hundredths": gpu_hundredths(spec.gpu or "0", limits),
        }
    except BoundsError as exc:
        raise InputError(str(exc)) from None


def rule_of(rule: ScalingRuleInput, index: int) -> ScalingRule:
    data = given(
        rule, "metric", "scale_up_above", "scale_down_below", "step", "cooldown_s", "window_s"
    )
    return validated(ScalingRule, data, f"rules.{index}")


def scaling_of(given_scaling: ScalingInput | None, *, base: Scaling) -> Scaling:
    if given_scaling is None:
        return base
    data = base.model_dump()
    data.update(given(given_scaling, "min_replicas", "max_replicas", "cold_start_timeout_s"))
    if given_scaling.rules is not None:
        data["rules"] = tuple(rule_of(r, i) for i, r in enumerate(given_scaling.rules))
    return validated(Scaling, data, "scaling")


def rollout_of(given_scaling: ScalingInput | None, *, base: Rollout) -> Rollout:
    if given_scaling is None:
        return base
    data = {**base.model_dump(), **given(given_scaling, "max_surge", "max_unavailable")}
    return validated(Rollout, data, "scaling")
