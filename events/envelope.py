"""The one envelope every event travels in, and the cause that every write carries.

Stored as the JSON body of a message on ``ev.<aggregate>.<id>``; the wire name and event id are
repeated in headers so readers can skip events without decoding JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict

from schemas.principal import Actor, Tenant
from schemas.subjects import AggregateType, event_subject


class Cause(BaseModel):
    """Why a write happens: the command (or event) that caused it and on whose behalf.

    Event ids are derived from ``causation_id``, so a retried decision writes the same ids and
    the store can tell its own earlier write from someone else's.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    causation_id: str
    correlation_id: str
    actor: Actor
    tenant: Tenant


class Envelope(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    event_id: str
    name: str
    schema_version: int
    aggregate_type: AggregateType
    aggregate_id: str
    aggregate_version: int
    occurred_at: AwareDatetime
    causation_id: str
    correlation_id: str
    actor: Actor
    tenant: Tenant
    payload: dict[str, Any]

    @property
    def subject(self) -> str:
        return event_subject(self.aggregate_type, self.aggregate_id)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An envelope as read back from the stream, with its global position."""

    seq: int
    envelope: Envelope

    @property
    def name(self) -> str:
        return self.envelope.name
