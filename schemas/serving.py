"""Model serving's vocabulary: an endpoint's revision (what its replicas run), its health check,
scaling rules and rollout bounds, a replica's three separate states (lifecycle, health,
traffic), the endpoint's status as counted from them, endpoint names and their ids, and the
shape of endpoint tokens. Lenient when read from the log (unknown fields ignored); commands
refuse unknown fields in their input. Pure; no subjects.

An endpoint (``ev.endpoint.<id>``) is written only by the serving controller
(``services/serving``); the app proxy and the read models fold the same events.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.bounds import CEILINGS, InputLimits
from schemas.ids import derived_id
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionType, check_request
from schemas.vfolder import MountRequest, mount_path_problem

NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$"
"""3-63 lowercase letters, digits and '-' (not first or last): an endpoint's name is part of
its URL (``/e/<name>/``), so it is unique in the installation."""
_NAME = re.compile(NAME_PATTERN)
MAX_REPLICAS = 64
MAX_RULES = 8
MAX_ENV = 64
INFERENCE_APP = "inference"
"""The app name an inference replica's port is reported under (``KernelServicePortsReported``)."""
TOKEN_PREFIX = "jyep"
DEFAULT_MODEL_MOUNT = "/models"
MODEL_PATH_VARIABLES = ("BACKEND_MODEL_PATH", "JETYARD_MODEL_PATH")
"""Set in every replica to the model folder's mount path (Backend.AI's name, and ours)."""
RESERVED_PORTS = frozenset({2000, 2001})
"""Ports Backend.AI's images keep for their REPL: a replica may not serve on them."""


def endpoint_name_problem(name: str) -> str | None:
    if _NAME.match(name):
        return None
    return (
        f"endpoint name {name[:80]!r} is not valid: use 3 to 63 lowercase letters, digits "
        "and '-', starting and ending with a letter or digit"
    )


def endpoint_id_for(name: str) -> str:
    """Names are unique in the installation (they are in the URL): the id derives from it."""
    return derived_id("endpoint", name)


def replica_command_id(endpoint_id: str, incarnation: str, replica: int) -> str:
    """The id of the ``CreateSession`` the controller sends for replica number ``replica``;
    the replica's session id is ``session_id_for`` of it, so a re-sent create is the same
    session. ``incarnation`` (the id of the command that made the endpoint) keeps the
    replicas of two endpoints of one name apart: two installations sharing a container
    engine name containers after their kernels, which derive from the session id."""
    return derived_id("endpoint-replica", endpoint_id, incarnation, str(replica))


class HealthCheck(BaseModel):
    """How the controller probes each replica: ``GET <path>`` every ``interval_s`` with a
    ``timeout_s`` bound, healthy on ``expected_status``. A new replica has ``warmup_s`` to pass
    its first probe; a replica that fails ``failures`` probes in a row is unhealthy (out of the
    rotation at once) and is replaced when it has stayed so ``replace_after_s``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    path: str = Field(default="/health", min_length=1, max_length=256, pattern=r"^/[!-~]*$")
    interval_s: float = Field(default=5.0, ge=0.2, le=300)
    timeout_s: float = Field(default=2.0, ge=0.1, le=60)
    failures: int = Field(default=3, ge=1, le=100)
    warmup_s: float = Field(default=300.0, ge=1, le=86_400)
    expected_status: int = Field(default=200, ge=100, le=599)
    replace_after_s: float = Field(default=10.0, ge=0, le=86_400)


class ScalingMetric(StrEnum):
    RPS = "rps"
    """Requests per second per replica, counted by the app proxies over the rule's window."""
    INFLIGHT = "inflight"
    """Requests in flight per replica (the proxies' count now)."""
    CPU = "cpu"
    """Mean CPU use of the replicas, in percent of what each was allocated (agents' reports)."""
    GPU = "gpu"
    """Mean GPU use of the replicas, in percent of the busiest device (agents' reports)."""


class ScalingRule(BaseModel):
    """Scale up by ``step`` when the metric is above ``scale_up_above``, down by ``step`` when
    below ``scale_down_below``; then not again for ``cooldown_s`` by this rule. The result is
    clamped to the endpoint's min and max (never skipped)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    metric: ScalingMetric
    scale_up_above: float | None = Field(default=None, ge=0, le=1e9)
    scale_down_below: float | None = Field(default=None, ge=0, le=1e9)
    step: int = Field(default=1, ge=1, le=MAX_REPLICAS)
    cooldown_s: float = Field(default=60.0, ge=0, le=86_400)
    window_s: float = Field(default=30.0, ge=1, le=3600)
    """How far back a rate or a use is averaged."""

    @model_validator(mode="after")
    def _thresholds(self) -> Self:
        up, down = self.scale_up_above, self.scale_down_below
        if up is None and down is None:
            raise ValueError("a scaling rule needs scale_up_above, scale_down_below or both")
        if up is not None and down is not None and down >= up:
            raise ValueError(
                f"scale_down_below ({down}) must be below scale_up_above ({up}), or the rule "
                "would scale up and down on the same value"
            )
        return self


class Rollout(BaseModel):
    """How a new revision replaces the replicas: at most ``max_surge`` replicas above the
    desired count while it rolls, and at most ``max_unavailable`` healthy replicas fewer than
    desired. A new revision none of whose replicas becomes healthy within its health check's
    warm-up (``failed_replicas`` of them) is rolled back."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    max_surge: int = Field(default=1, ge=0, le=MAX_REPLICAS)
    max_unavailable: int = Field(default=0, ge=0, le=MAX_REPLICAS)
    failed_replicas: int = Field(default=2, ge=1, le=MAX_REPLICAS)

    @model_validator(mode="after")
    def _moves(self) -> Self:
        if self.max_surge == 0 and self.max_unavailable == 0:
            raise ValueError("max_surge and max_unavailable cannot both be 0: nothing could move")
        return self


class Revision(BaseModel):
    """What every replica of one revision runs: immutable once added (a change is a new
    revision). ``command`` may hold ``{model_path}`` (the model folder's mount path)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    image: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
    command: tuple[str, ...] | None = Field(default=None, max_length=64)
    port: int = Field(ge=1, le=65535)
    model_folder: str | None = Field(default=None, min_length=1, max_length=64)
    """The folder holding the model (name or id), mounted read-only; None for a replica that
    needs none."""
    model_mount: str = DEFAULT_MODEL_MOUNT
    model_version: str = Field(default="", max_length=128)
    env: dict[str, str] = Field(default_factory=dict)
    resources: ResourceSlots
    resource_group: str = Field(default="default", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    health: HealthCheck = Field(default_factory=HealthCheck)

    @field_validator("port")
    @classmethod
    def _port(cls, port: int) -> int:
        if port in RESERVED_PORTS:
            raise ValueError(f"port {port} is reserved (2000 and 2001 are the REPL's)")
        return port

    @field_validator("model_mount")
    @classmethod
    def _mount(cls, path: str) -> str:
        problem = mount_path_problem(path)
        if problem is not None:
            raise ValueError(problem)
        return path

    @field_validator("env")
    @classmethod
    def _env(cls, env: dict[str, str]) -> dict[str, str]:
        if len(env) > MAX_ENV:
            raise ValueError(f"at most {MAX_ENV} environment variables, got {len(env)}")
        for key in env:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$", key):
                raise ValueError(f"environment variable name {key[:80]!r} is not valid")
        return env

    def start_command(self) -> tuple[str, ...] | None:
        """The command with ``{model_path}`` put in."""
        if self.command is None:
            return None
        return tuple(part.replace("{model_path}", self.model_mount) for part in self.command)

    def replica_spec(self, name: str | None = None) -> SessionSpec:
        """The inference session every replica of this revision is: one kernel of its
        resources, its start command, the model folder mounted read-only at ``model_mount``
        (named in ``MODEL_PATH_VARIABLES``), its port served as the app ``inference``."""
        mounts: tuple[MountRequest, ...] = ()
        if self.model_folder is not None:
            mounts = (
                MountRequest(folder=self.model_folder, path=self.model_mount, read_only=True),
            )
        return SessionSpec(
            image=self.image, type=SessionType.INFERENCE,
            kernels=(KernelSpec(resources=self.resources),), command=self.start_command(),
            env={**self.env, **dict.fromkeys(MODEL_PATH_VARIABLES, self.model_mount)},
            name=name, resource_group=self.resource_group, mounts=mounts,
            service_port=self.port,
        )  # fmt: skip


def check_revision(spec: Revision, limits: InputLimits = CEILINGS) -> None:
    """``BoundsError`` naming the limit unless the revision's replicas are sessions the
    scheduler takes (``check_request``: resources, command words, environment)."""
    check_request(spec.replica_spec(), limits)


class Scaling(BaseModel):
    """The endpoint's replica bounds and rules; ``replicas`` is the desired count a person set
    last (rules move it within ``min_replicas``..``max_replicas``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    min_replicas: int = Field(default=1, ge=0, le=MAX_REPLICAS)
    max_replicas: int = Field(default=1, ge=0, le=MAX_REPLICAS)
    rules: tuple[ScalingRule, ...] = Field(default=(), max_length=MAX_RULES)
    cold_start_timeout_s: float = Field(default=120.0, ge=1, le=3600)
    """How long the app proxy holds a request that arrived while no replica was up (scaled
    to zero, or starting), waiting for the first one to become healthy."""

    @model_validator(mode="after")
    def _bounds(self) -> Self:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) is above max_replicas ({self.max_replicas})"
            )
        return self

    def clamp(self, replicas: int) -> int:
        return max(self.min_replicas, min(self.max_replicas, replicas))


class ReplicaLifecycle(StrEnum):
    PROVISIONING = "PROVISIONING"
    """Its session was asked for and has not passed a probe yet (placing, pulling, warming)."""
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    """Retired: out of the rotation, its session being ended."""
    TERMINATED = "TERMINATED"
    FAILED = "FAILED"
    """It never became healthy (the reason holds the probe's last answer), or its session
    could not start."""

    @property
    def has_ended(self) -> bool:
        return self in (ReplicaLifecycle.TERMINATED, ReplicaLifecycle.FAILED)


class ReplicaHealth(StrEnum):
    NOT_CHECKED = "NOT_CHECKED"
    HEALTHY = "HEALTHY"
    UNHEALTHY = "UNHEALTHY"


class ReplicaTraffic(StrEnum):
    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"


class EndpointStatus(StrEnum):
    READY = "READY"
    """Every desired replica healthy and taking traffic."""
    DEGRADED = "DEGRADED"
    """Some replicas healthy, fewer than desired: it answers."""
    UNAVAILABLE = "UNAVAILABLE"
    """Replicas desired, none healthy: requests wait (cold start) or fail."""
    SCALED_TO_ZERO = "SCALED_TO_ZERO"
    """No replica desired: the first request wakes it."""
    DESTROYING = "DESTROYING"
    DESTROYED = "DESTROYED"


def endpoint_status(
    desired: int, serving: int, destroying: bool, destroyed: bool
) -> EndpointStatus:
    """The status from the counts: ``serving`` replicas are RUNNING, HEALTHY and ACTIVE."""
    if destroyed:
        return EndpointStatus.DESTROYED
    if destroying:
        return EndpointStatus.DESTROYING
    if desired == 0 and serving == 0:
        return EndpointStatus.SCALED_TO_ZERO
    if serving == 0:
        return EndpointStatus.UNAVAILABLE
    if serving < desired:
        return EndpointStatus.DEGRADED
    return EndpointStatus.READY


class ScaleSource(StrEnum):
    MANUAL = "manual"
    RULE = "rule"
    WAKE = "wake"
    """A request arrived while scaled to zero."""
    BOUNDS = "bounds"
    """The min/max changed and the desired count was clamped into them."""


def token_text(token_id: str, secret: str) -> str:
    """An endpoint token as given to people: ``jyep_<token id>_<secret>``."""
    return f"{TOKEN_PREFIX}_{token_id}_{secret}"


def parse_token(text: str) -> tuple[str, str] | None:
    """(token id, secret) of a token as given to people; None if it is not shaped like one."""
    prefix, _, rest = text.strip().partition("_")
    token_id, _, secret = rest.partition("_")
    if prefix != TOKEN_PREFIX or not token_id or not secret or len(token_id) > 64:
        return None
    return token_id, secret
