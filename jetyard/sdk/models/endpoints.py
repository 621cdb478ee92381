"""What the SDK returns for model-serving endpoints (``jetyard.sdk.endpoints``): an endpoint
as listings show it, one in full (revisions, replicas with their three states, tokens without
secrets, scaling decisions), and a token as issued (its text, shown once)."""

from __future__ import annotations

from datetime import datetime

from jetyard.sdk.models.sessions import Resources
from jetyard.sdk.wire import Model


class HealthCheck(Model):
    path: str
    interval_s: float
    timeout_s: float
    failures: int
    warmup_s: float
    expected_status: int
    replace_after_s: float


class EndpointRevision(Model):
    revision: int
    image: str
    command: list[str] | None = None
    port: int
    model_folder: str | None = None
    model_mount: str
    model_version: str
    env_names: list[str]
    resources: Resources
    resource_group: str
    health: HealthCheck
    reason: str
    added_at: datetime
    rolled_back_reason: str | None = None


class EndpointReplica(Model):
    """One replica: its lifecycle, health and traffic are separate states."""

    replica: int
    session_id: str
    revision: int
    lifecycle: str
    health: str
    traffic: str
    reason: str
    requested_at: datetime
    changed_at: datetime


class EndpointToken(Model):
    token_id: str
    note: str
    issued_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None
    revoke_reason: str | None = None


class ScalingRule(Model):
    metric: str
    scale_up_above: float | None = None
    scale_down_below: float | None = None
    step: int
    cooldown_s: float
    window_s: float


class ScalingDecision(Model):
    replicas: int
    previous: int
    source: str
    reason: str
    rule: int | None = None
    metric: str | None = None
    value: float | None = None
    at: datetime


class Endpoint(Model):
    """An endpoint as listings show it."""

    id: str
    name: str
    url_path: str
    url: str
    """Its URL at the app proxy (``Authorization: Bearer <token>`` unless it is public)."""
    status: str
    user_id: str
    project_id: str
    domain: str
    desired_replicas: int
    serving_replicas: int
    min_replicas: int
    max_replicas: int
    rules: list[ScalingRule]
    cold_start_timeout_s: float
    max_surge: int
    max_unavailable: int
    current_revision: int
    target_revision: int | None = None
    open_to_public: bool
    created_at: datetime
    updated_at: datetime
    destroyed_at: datetime | None = None
    last_scaling_reason: str | None = None
    last_scaled_at: datetime | None = None


class Traffic(Model):
    """What the app proxies measure now (None while no proxy reports)."""

    requests_per_second: float | None = None
    inflight: int | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None


class EndpointDetail(Endpoint):
    """One endpoint in full."""

    traffic: Traffic
    revisions: list[EndpointRevision]
    replicas: list[EndpointReplica]
    tokens: list[EndpointToken]
    scaling_history: list[ScalingDecision]


class IssuedToken(Model):
    """A new token: ``token`` (``Authorization: Bearer <token>``) is shown only this once."""

    command_id: str
    status: str
    token_id: str
    token: str
    expires_at: datetime
