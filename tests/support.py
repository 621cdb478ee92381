"""Helpers for tests: envelopes for an aggregate without going through a domain model."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from events.envelope import Envelope
from events.writes import AggregateRef
from schemas.ids import event_id_for, new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.subjects import AggregateType

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
TEST_ACTOR = Actor.service("tests")


def ref(kind: AggregateType = AggregateType.SESSION) -> AggregateRef:
    return AggregateRef(kind, new_id())


def envelope(
    aggregate: AggregateRef,
    version: int,
    *,
    name: str = "TestHappened",
    cause: str | None = None,
    payload: dict[str, Any] | None = None,
) -> Envelope:
    causation = cause or new_id()
    return Envelope(
        event_id=event_id_for(causation, aggregate.type.value, aggregate.id, version),
        name=name,
        schema_version=1,
        aggregate_type=aggregate.type,
        aggregate_id=aggregate.id,
        aggregate_version=version,
        occurred_at=NOW,
        causation_id=causation,
        correlation_id=causation,
        actor=TEST_ACTOR,
        tenant=SYSTEM_TENANT,
        payload=payload or {"n": version},
    )
