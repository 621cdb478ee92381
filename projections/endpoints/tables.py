"""The endpoints view's storage: its tables (``endpoints``, ``endpoint_revisions``,
``endpoint_replicas``, ``endpoint_tokens``, ``endpoint_scalings``), their read shapes (one
record per table) and the mapping between rows and records. The fold that fills them is
``projections.endpoints.view``; no token secret or digest is ever stored here."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
)

from projections.db import UTCDateTime
from schemas.serving import (
    EndpointStatus,
    ReplicaHealth,
    ReplicaLifecycle,
    ReplicaTraffic,
    Revision,
    Rollout,
    ScaleSource,
    Scaling,
    ScalingMetric,
)
from schemas.tenancy import SessionOwner


@dataclass(frozen=True, slots=True)
class EndpointTables:
    metadata: MetaData
    endpoints: Table
    revisions: Table
    replicas: Table
    tokens: Table
    scalings: Table


@lru_cache(maxsize=8)
def tables(suffix: str = "") -> EndpointTables:
    """The view's tables; a rebuild builds a second set under a suffix and swaps it in."""
    md = MetaData()
    endpoints = Table(
        f"endpoints{suffix}",
        md,
        Column("id", String(64), primary_key=True),
        Column("created_seq", BigInteger, nullable=False),  # the keyset for pagination
        Column("name", String(64), nullable=False),
        Column("access_key", String(64), nullable=False),
        Column("user_id", String(64), nullable=False),
        Column("project_id", String(64), nullable=False),
        Column("domain", String(64), nullable=False),
        Column("status", String(16), nullable=False),
        Column("desired_replicas", Integer, nullable=False),
        Column("serving_replicas", Integer, nullable=False),  # RUNNING, HEALTHY and ACTIVE
        Column("min_replicas", Integer, nullable=False),
        Column("max_replicas", Integer, nullable=False),
        Column("scaling", JSON, nullable=False),  # schemas.serving.Scaling: rules, cold start
        Column("rollout", JSON, nullable=False),
        Column("current_revision", Integer, nullable=False),
        Column("target_revision", Integer),  # the revision being rolled to; NULL: none
        Column("open_to_public", Boolean, nullable=False),
        Column("destroying", Boolean, nullable=False),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("destroyed_at", UTCDateTime),
        Column("last_scaling_reason", String),
        Column("last_scaled_at", UTCDateTime),
        Column("last_seq", BigInteger, nullable=False),
    )
    Index(f"ix_{endpoints.name}_created", endpoints.c.created_seq, unique=True)
    Index(f"ix_{endpoints.name}_user", endpoints.c.user_id, endpoints.c.created_seq)
    Index(f"ix_{endpoints.name}_domain", endpoints.c.domain, endpoints.c.created_seq)
    revisions = Table(
        f"endpoint_revisions{suffix}",
        md,
        Column("endpoint_id", String(64), primary_key=True),
        Column("revision", Integer, primary_key=True),
        Column("spec", JSON, nullable=False),  # schemas.serving.Revision
        Column("reason", String, nullable=False),
        Column("added_at", UTCDateTime, nullable=False),
        Column("rolled_back_reason", String),  # NULL unless it never became healthy
    )
    replicas = Table(
        f"endpoint_replicas{suffix}",
        md,
        Column("endpoint_id", String(64), primary_key=True),
        Column("replica", Integer, primary_key=True),
        Column("session_id", String(64), nullable=False),
        Column("revision", Integer, nullable=False),
        Column("lifecycle", String(16), nullable=False),
        Column("health", String(16), nullable=False),
        Column("traffic", String(16), nullable=False),
        Column("reason", String, nullable=False),  # why it last changed
        Column("requested_at", UTCDateTime, nullable=False),
        Column("changed_at", UTCDateTime, nullable=False),
    )
    # The fold loads an endpoint's replicas that have not ended.
    Index(f"ix_{replicas.name}_lifecycle", replicas.c.endpoint_id, replicas.c.lifecycle)
    tokens = Table(
        f"endpoint_tokens{suffix}",
        md,
        Column("endpoint_id", String(64), primary_key=True),
        Column("token_id", String(64), primary_key=True),
        Column("note", String, nullable=False),
        Column("issued_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Column("revoked_at", UTCDateTime),
        Column("revoke_reason", String),
    )
    scalings = Table(
        f"endpoint_scalings{suffix}",
        md,
        Column("endpoint_id", String(64), primary_key=True),
        Column("seq", BigInteger, primary_key=True),  # the EndpointScaled event's
        Column("at", UTCDateTime, nullable=False),
        Column("replicas", Integer, nullable=False),
        Column("previous", Integer, nullable=False),
        Column("source", String(16), nullable=False),
        Column("reason", String, nullable=False),
        Column("rule", Integer),
        Column("metric", String(16)),
        Column("value", Float),
    )
    return EndpointTables(md, endpoints, revisions, replicas, tokens, scalings)


@dataclass(frozen=True, slots=True)
class EndpointRecord:
    """One endpoint (an ``endpoints`` row): the view's read shape the gateway resolves from."""

    id: str
    created_seq: int
    name: str
    owner: SessionOwner
    """Whose replicas' sessions are (the columns access_key, user_id, project_id, domain)."""
    status: EndpointStatus
    """``schemas.serving.endpoint_status`` of the counts below."""
    desired_replicas: int
    serving_replicas: int
    scaling: Scaling
    rollout: Rollout
    current_revision: int
    target_revision: int | None
    open_to_public: bool
    destroying: bool
    created_at: datetime
    updated_at: datetime
    destroyed_at: datetime | None
    last_scaling_reason: str | None
    last_scaled_at: datetime | None
    last_seq: int
    """The seq of the last event applied to the endpoint: older or repeated ones change nothing."""


@dataclass(frozen=True, slots=True)
class RevisionRecord:
    endpoint_id: str
    revision: int
    spec: Revision
    reason: str
    added_at: datetime
    rolled_back_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ReplicaRecord:
    endpoint_id: str
    replica: int
    session_id: str
    revision: int
    lifecycle: ReplicaLifecycle
    health: ReplicaHealth
    traffic: ReplicaTraffic
    reason: str
    requested_at: datetime
    changed_at: datetime

    @property
    def serving(self) -> bool:
        """In the rotation: what the app proxies route to."""
        return (self.lifecycle, self.health, self.traffic) == (
            ReplicaLifecycle.RUNNING, ReplicaHealth.HEALTHY, ReplicaTraffic.ACTIVE,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A token as listed: never its secret, nor the secret's digest."""

    endpoint_id: str
    token_id: str
    note: str
    issued_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None
    revoke_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ScalingRecord:
    """One change of the desired replica count, and why (an ``EndpointScaled``)."""

    endpoint_id: str
    seq: int
    at: datetime
    replicas: int
    previous: int
    source: ScaleSource
    reason: str
    rule: int | None
    metric: ScalingMetric | None
    value: float | None


_OWNER = ("access_key", "user_id", "project_id", "domain")
_PLAIN = tuple(
    f.name
    for f in fields(EndpointRecord)
    if f.name not in ("owner", "status", "scaling", "rollout")
)


def to_row(record: EndpointRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in _PLAIN}
    row.update({name: getattr(record.owner, name) for name in _OWNER})
    row["status"] = record.status.value
    row["scaling"] = record.scaling.model_dump(mode="json")
    row["rollout"] = record.rollout.model_dump(mode="json")
    row["min_replicas"] = record.scaling.min_replicas
    row["max_replicas"] = record.scaling.max_replicas
    return row


def from_row(row: Any) -> EndpointRecord:
    return EndpointRecord(
        **{name: getattr(row, name) for name in _PLAIN},
        owner=SessionOwner(**{name: getattr(row, name) for name in _OWNER}),
        status=EndpointStatus(row.status),
        scaling=Scaling.model_validate(row.scaling),
        rollout=Rollout.model_validate(row.rollout),
    )


def revision_to_row(record: RevisionRecord) -> dict[str, Any]:
    row = {f.name: getattr(record, f.name) for f in fields(RevisionRecord)}
    row["spec"] = record.spec.model_dump(mode="json")
    return row


def revision_from_row(row: Any) -> RevisionRecord:
    values = {f.name: getattr(row, f.name) for f in fields(RevisionRecord)}
    values["spec"] = Revision.model_validate(row.spec)
    return RevisionRecord(**values)


_REPLICA_ENUMS = {"lifecycle": ReplicaLifecycle, "health": ReplicaHealth, "traffic": ReplicaTraffic}


def replica_to_row(record: ReplicaRecord) -> dict[str, Any]:
    row = {f.name: getattr(record, f.name) for f in fields(ReplicaRecord)}
    for name in _REPLICA_ENUMS:
        row[name] = row[name].value
    return row


def replica_from_row(row: Any) -> ReplicaRecord:
    values = {f.name: getattr(row, f.name) for f in fields(ReplicaRecord)}
    for name, enum in _REPLICA_ENUMS.items():
        values[name] = enum(values[name])
    return ReplicaRecord(**values)


def token_to_row(record: TokenRecord) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(TokenRecord)}


def token_from_row(row: Any) -> TokenRecord:
    return TokenRecord(**{f.name: getattr(row, f.name) for f in fields(TokenRecord)})


def scaling_to_row(record: ScalingRecord) -> dict[str, Any]:
    row = {f.name: getattr(record, f.name) for f in fields(ScalingRecord)}
    row["source"] = record.source.value
    row["metric"] = None if record.metric is None else record.metric.value
    return row


def scaling_from_row(row: Any) -> ScalingRecord:
    values = {f.name: getattr(row, f.name) for f in fields(ScalingRecord)}
    values["source"] = ScaleSource(row.source)
    values["metric"] = None if row.metric is None else ScalingMetric(row.metric)
    return ScalingRecord(**values)
