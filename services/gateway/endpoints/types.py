"""GraphQL object types of model-serving endpoints: the endpoint (built from the endpoints
view's ``EndpointRecord`` by ``Endpoint.of``, the only place its fields meet their GraphQL
names), its revisions, its replicas with their three states, its tokens (never a secret), its
scaling rules and decisions, a page of endpoints, a command's outcome, and a token as issued
(the one time its text is shown). Revisions, replicas, tokens and the scaling history are read
only when asked for."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry
from strawberry.types import Info

from projections.endpoints.queries import MAX_HISTORY, encode_cursor
from projections.endpoints.tables import (
    EndpointRecord,
    ReplicaRecord,
    RevisionRecord,
    ScalingRecord,
    TokenRecord,
)
from schemas.serving import HealthCheck, Revision, ScalingRule
from services.gateway.context import Context, ctx_of, invalid
from services.gateway.core.serving_traffic import LATENCY_WINDOW_S, RATE_WINDOW_S
from services.gateway.core.types import OutcomeStatus, PageInfo, Resources, resources

MAX_ENDED_REPLICAS = 100


@strawberry.type
class EndpointHealthCheck:
    path: str
    interval_s: float
    timeout_s: float
    failures: int
    warmup_s: float
    expected_status: int
    replace_after_s: float

    @classmethod
    def of(cls, health: HealthCheck) -> EndpointHealthCheck:
        return cls(**health.model_dump())


@strawberry.type
class EndpointRevision:
    revision: int
    image: str
    command: list[str] | None
    port: int
    model_folder: str | None
    model_mount: str
    model_version: str
    env_names: list[str] = strawberry.field(
        description="its environment variables' names (values may be secrets: not shown)"
    )
    resources: Resources
    resource_group: str
    health: EndpointHealthCheck
    reason: str
    added_at: datetime
    rolled_back_reason: str | None = strawberry.field(
        description="why it was rolled back (its probes' last answer); null: it was not"
    )

    @classmethod
    def of(cls, record: RevisionRecord) -> EndpointRevision:
        spec: Revision = record.spec
        slots = spec.resources
        return cls(
            revision=record.revision, image=spec.image,
            command=None if spec.command is None else list(spec.command), port=spec.port,
            model_folder=spec.model_folder, model_mount=spec.model_mount,
            model_version=spec.model_version, env_names=sorted(spec.env),
            resources=resources(slots.cpu_milli, slots.memory_bytes, slots.gpu_hundredths),
            resource_group=spec.resource_group, health=EndpointHealthCheck.of(spec.health),
            reason=record.reason, added_at=record.added_at,
            rolled_back_reason=record.rolled_back_reason,
        )  # fmt: skip


@strawberry.type
class EndpointReplica:
    replica: int = strawberry.field(description="its number (never reused)")
    session_id: strawberry.ID
    revision: int
    lifecycle: str = strawberry.field(
        description="PROVISIONING | RUNNING | TERMINATING | TERMINATED | FAILED"
    )
    health: str = strawberry.field(description="NOT_CHECKED | HEALTHY | UNHEALTHY")
    traffic: str = strawberry.field(description="ACTIVE (in the rotation) | INACTIVE")
    reason: str = strawberry.field(description="why it last changed (a probe's answer, ...)")
    requested_at: datetime
    changed_at: datetime

    @classmethod
    def of(cls, record: ReplicaRecord) -> EndpointReplica:
        return cls(
            replica=record.replica, session_id=strawberry.ID(record.session_id),
            revision=record.revision, lifecycle=record.lifecycle.value,
            health=record.health.value, traffic=record.traffic.value, reason=record.reason,
            requested_at=record.requested_at, changed_at=record.changed_at,
        )  # fmt: skip


@strawberry.type
class EndpointToken:
    """A token as listed: its id, never its secret."""

    token_id: strawberry.ID
    note: str
    issued_at: datetime
    expires_at: datetime
    revoked_at: datetime | None
    revoke_reason: str | None

    @classmethod
    def of(cls, record: TokenRecord) -> EndpointToken:
        return cls(
            token_id=strawberry.ID(record.token_id), note=record.note,
            issued_at=record.issued_at, expires_at=record.expires_at,
            revoked_at=record.revoked_at, revoke_reason=record.revoke_reason,
        )  # fmt: skip


@strawberry.type
class EndpointScalingRule:
    metric: str = strawberry.field(description="rps | inflight | cpu | gpu")
    scale_up_above: float | None
    scale_down_below: float | None
    step: int
    cooldown_s: float
    window_s: float

    @classmethod
    def of(cls, rule: ScalingRule) -> EndpointScalingRule:
        return cls(**{**rule.model_dump(), "metric": rule.metric.value})


@strawberry.type
class ScalingDecision:
    replicas: int
    previous: int
    source: str = strawberry.field(description="manual | rule | wake | bounds")
    reason: str
    rule: int | None = strawberry.field(description="the rule's index, for source rule")
    metric: str | None
    value: float | None = strawberry.field(description="the value that crossed the threshold")
    at: datetime

    @classmethod
    def of(cls, record: ScalingRecord) -> ScalingDecision:
        return cls(
            replicas=record.replicas, previous=record.previous, source=record.source.value,
            reason=record.reason, rule=record.rule,
            metric=None if record.metric is None else record.metric.value, value=record.value,
            at=record.at,
        )  # fmt: skip


async def _revisions(root: Endpoint, info: Info[Context, Any]) -> list[EndpointRevision]:
    found = await ctx_of(info).views.endpoints.revisions(root.record.id)
    return [EndpointRevision.of(r) for r in found]


async def _replicas(
    root: Endpoint, info: Info[Context, Any], ended: int = 0
) -> list[EndpointReplica]:
    if not 0 <= ended <= MAX_ENDED_REPLICAS:
        raise invalid(f"ended must be between 0 and {MAX_ENDED_REPLICAS}, got {ended}")
    found = await ctx_of(info).views.endpoints.replicas(root.record.id, ended=ended)
    return [EndpointReplica.of(r) for r in found]


async def _tokens(root: Endpoint, info: Info[Context, Any]) -> list[EndpointToken]:
    return [EndpointToken.of(t) for t in await ctx_of(info).views.endpoints.tokens(root.record.id)]


async def _scaling_history(
    root: Endpoint, info: Info[Context, Any], last: int = 20
) -> list[ScalingDecision]:
    if not 1 <= last <= MAX_HISTORY:
        raise invalid(f"last must be between 1 and {MAX_HISTORY}, got {last}")
    found = await ctx_of(info).views.endpoints.scalings(root.record.id, last=last)
    return [ScalingDecision.of(s) for s in found]


@strawberry.type(
    description="What the app proxies measure of an endpoint now (all proxy replicas; never on "
    "the log): null fields while no proxy reports"
)
class EndpointTraffic:
    requests_per_second: float | None = strawberry.field(description="over the last 10 s")
    inflight: int | None = strawberry.field(description="requests in flight now, held included")
    p50_ms: float | None = strawberry.field(description="median latency over the last 60 s")
    p99_ms: float | None = strawberry.field(description="99th percentile over the last 60 s")


def _traffic(root: Endpoint, info: Info[Context, Any]) -> EndpointTraffic:
    heard = ctx_of(info).services.traffic
    if heard is None:
        return EndpointTraffic(requests_per_second=None, inflight=None, p50_ms=None, p99_ms=None)
    board, endpoint_id = heard.board, root.record.id
    inflight = board.inflight(endpoint_id)
    return EndpointTraffic(
        requests_per_second=board.rate(endpoint_id, RATE_WINDOW_S),
        inflight=None if inflight is None else int(inflight),
        p50_ms=board.latency_ms(endpoint_id, 0.5, LATENCY_WINDOW_S),
        p99_ms=board.latency_ms(endpoint_id, 0.99, LATENCY_WINDOW_S),
    )


@strawberry.type
class Endpoint:
    id: strawberry.ID
    name: str
    url_path: str = strawberry.field(description="where the app proxy serves it: /e/<name>/")

    @strawberry.field(description="its URL at the app proxy (the gateway's appproxy_url)")
    def url(self, info: Info[Context, Any]) -> str:
        return ctx_of(info).settings.appproxy_url.rstrip("/") + self.url_path

    status: str = strawberry.field(
        description="READY | DEGRADED (some replicas serve, fewer than desired) | UNAVAILABLE "
        "(none serves) | SCALED_TO_ZERO | DESTROYING | DESTROYED"
    )
    user_id: str = strawberry.field(description="the owner: whose replicas' sessions are")
    access_key: str
    project_id: str
    domain: str
    desired_replicas: int
    serving_replicas: int = strawberry.field(description="RUNNING, HEALTHY and ACTIVE")
    min_replicas: int
    max_replicas: int
    rules: list[EndpointScalingRule]
    cold_start_timeout_s: float
    max_surge: int
    max_unavailable: int
    current_revision: int
    target_revision: int | None = strawberry.field(description="the revision being rolled to")
    open_to_public: bool
    created_at: datetime
    updated_at: datetime
    destroyed_at: datetime | None
    last_scaling_reason: str | None
    last_scaled_at: datetime | None
    record: strawberry.Private[EndpointRecord]
    revisions: list[EndpointRevision] = strawberry.field(
        resolver=_revisions, description="every revision, newest first"
    )
    replicas: list[EndpointReplica] = strawberry.field(
        resolver=_replicas,
        description="replicas that have not ended, and the `ended` latest that have",
    )
    tokens: list[EndpointToken] = strawberry.field(
        resolver=_tokens, description="its tokens, never their secrets"
    )
    scaling_history: list[ScalingDecision] = strawberry.field(
        resolver=_scaling_history, description="the `last` scaling decisions, newest first"
    )
    traffic: EndpointTraffic = strawberry.field(
        resolver=_traffic, description="request rate, in flight and latency, from the proxies"
    )

    @classmethod
    def of(cls, record: EndpointRecord) -> Endpoint:
        owner, scaling = record.owner, record.scaling
        return cls(
            id=strawberry.ID(record.id), name=record.name, url_path=f"/e/{record.name}/",
            status=record.status.value, user_id=owner.user_id, access_key=owner.access_key,
            project_id=owner.project_id, domain=owner.domain,
            desired_replicas=record.desired_replicas, serving_replicas=record.serving_replicas,
            min_replicas=scaling.min_replicas, max_replicas=scaling.max_replicas,
            rules=[EndpointScalingRule.of(rule) for rule in scaling.rules],
            cold_start_timeout_s=scaling.cold_start_timeout_s,
            max_surge=record.rollout.max_surge, max_unavailable=record.rollout.max_unavailable,
            current_revision=record.current_revision, target_revision=record.target_revision,
            open_to_public=record.open_to_public, created_at=record.created_at,
            updated_at=record.updated_at, destroyed_at=record.destroyed_at,
            last_scaling_reason=record.last_scaling_reason,
            last_scaled_at=record.last_scaled_at, record=record,
        )  # fmt: skip


@strawberry.type
class EndpointEdge:
    cursor: str
    node: Endpoint

    @classmethod
    def of(cls, record: EndpointRecord) -> EndpointEdge:
        return cls(cursor=encode_cursor(record.created_seq), node=Endpoint.of(record))


@strawberry.type
class EndpointConnection:
    edges: list[EndpointEdge]
    page_info: PageInfo
    total_count: int


@strawberry.type
class EndpointOutcome:
    command_id: strawberry.ID
    status: OutcomeStatus
    code: str | None
    message: str
    endpoint_id: strawberry.ID
    endpoint: Endpoint | None = strawberry.field(
        description="as the views hold it after the command (null: not there yet)"
    )


@strawberry.type
class IssuedEndpointToken:
    """A new token: ``token`` is shown this once (only its digest is kept)."""

    command_id: strawberry.ID
    status: OutcomeStatus
    token_id: strawberry.ID
    token: str = strawberry.field(description="'Authorization: Bearer <token>'; shown once")
    expires_at: datetime
