"""Given-events / when-command / then-events for aggregate tests: pure, in memory, no NATS.

``given`` rehydrates an aggregate from catalogue payloads (as if read from the log), the test
calls a command on it (the *when*), and ``then`` collects what it decided, decoded back into
catalogue payloads so that a test compares plain events.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TypeVar

from commands.aggregate import Aggregate
from events.catalogue import CATALOGUE, Event
from events.envelope import Cause, Envelope
from schemas.ids import event_id_for
from schemas.principal import SYSTEM_TENANT, Actor

A = TypeVar("A", bound=Aggregate)

T0 = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CAUSE = Cause(
    causation_id="cmd-1",
    correlation_id="corr-1",
    actor=Actor.service("tests"),
    tenant=SYSTEM_TENANT,
)


def at(seconds: int) -> datetime:
    """A moment ``seconds`` after T0: tests pass time in, aggregates never read a clock."""
    return T0 + timedelta(seconds=seconds)


def envelope_of(aggregate_id: str, version: int, event: Event, when: datetime) -> Envelope:
    kind = type(event).aggregate_type
    return Envelope(
        event_id=event_id_for("given", kind, aggregate_id, version),
        name=type(event).event_name,
        schema_version=type(event).schema_version,
        aggregate_type=kind,
        aggregate_id=aggregate_id,
        aggregate_version=version,
        occurred_at=when,
        causation_id="given",
        correlation_id="given",
        actor=CAUSE.actor,
        tenant=CAUSE.tenant,
        payload=event.model_dump(mode="json"),
    )


def stream(aggregate_id: str, *events: Event) -> list[Envelope]:
    """Envelopes for ``events`` as versions 1..n, one second apart from T0."""
    return [envelope_of(aggregate_id, i, e, at(i - 1)) for i, e in enumerate(events, start=1)]


def given(cls: type[A], aggregate_id: str, *events: Event) -> A:
    aggregate = cls.rehydrate(stream(aggregate_id, *events))
    assert aggregate is not None, "given needs at least the creating event"
    return aggregate


def then(aggregate: Aggregate) -> list[Event]:
    """What the command decided, as catalogue payloads (and nothing stays pending)."""
    return [CATALOGUE.decode(e) for e in aggregate.collect(CAUSE)]
