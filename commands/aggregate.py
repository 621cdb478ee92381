"""The aggregate base: the ``eventsourcing`` domain model with pydantic events, mapped to and
from Jetyard envelopes (wire names, never Python paths), plus snapshots.

An aggregate's nested event classes inherit from a catalogue payload event *and* from
``Aggregate.Event`` (or ``Aggregate.Created``), and evolve the aggregate in ``apply``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, ClassVar, Self

from eventsourcing.domain import BaseAggregate, CanInitAggregate, CanMutateAggregate
from eventsourcing.utils import get_topic
from pydantic import AwareDatetime, BaseModel, ConfigDict

from events import catalogue
from events.catalogue import CATALOGUE, UnknownEventError
from events.envelope import Cause, Envelope
from events.snapshots import Snapshot
from events.writes import AggregateRef
from schemas.ids import event_id_for
from schemas.subjects import AggregateType
from schemas.trusted import trusted

# What the library keeps on its events; the envelope carries these, so the payload does not.
LIBRARY_FIELDS = frozenset({"originator_id", "originator_version", "timestamp", "originator_topic"})
LIBRARY_EXCLUDED = set(LIBRARY_FIELDS)
"""The same, as the set a payload's dump leaves out (made once, not per event)."""
BUILT_FROM = "_built_from"
"""Where an envelope built in this process keeps the event object it was built from."""


class _SnapshotState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    created_on: AwareDatetime
    modified_on: AwareDatetime
    attributes: dict[str, Any]


class Aggregate(BaseAggregate[str]):
    """Base of every aggregate. Subclasses set ``aggregate_type``, define a pydantic ``State``
    whose fields are exactly the attributes ``__init__`` sets, and nested event classes."""

    aggregate_type: ClassVar[AggregateType]
    State: ClassVar[type[BaseModel]]
    # Wire name -> nested class: ``creators`` start an aggregate, ``events_by_name`` change
    # one. A name may be in both (a registration that may come again).
    creators: ClassVar[dict[str, type[Aggregate.Event]]]
    events_by_name: ClassVar[dict[str, type[Aggregate.Event]]]

    class Event(BaseModel, CanMutateAggregate[str]):
        """The library's side of an event: who it belongs to, its version, its time."""

        model_config = ConfigDict(frozen=True, extra="ignore")

        originator_id: str
        originator_version: int
        timestamp: AwareDatetime

    class Created(Event, CanInitAggregate[str]):
        # A Python path, needed in memory only: it is dropped from the wire and supplied on load.
        originator_topic: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Without its own ``Event`` and ``Created`` the library would define new bases and
        # silently redefine every nested event class under them; sharing ours keeps the
        # classes as written (``Session.Scheduled`` is the class in the source).
        for name in ("Event", "Created"):
            if name not in cls.__dict__:
                setattr(cls, name, getattr(Aggregate, name))
        super().__init_subclass__(**kwargs)
        cls.creators = _nested_events(cls, creators=True)
        cls.events_by_name = _nested_events(cls, creators=False)

    def _trigger(self, event_class: type[Aggregate.Event], now: datetime, **fields: Any) -> bool:
        """Decide: record an event at ``now`` (never the clock). True, so that commands can
        answer "did anything change" in one line."""
        self.trigger_event(event_class, timestamp=now, **fields)
        return True

    # ---- events to the wire --------------------------------------------------------------

    @property
    def ref(self) -> AggregateRef:
        return AggregateRef(self.aggregate_type, self.id)

    def collect(self, cause: Cause) -> list[Envelope]:
        """Take the pending events, as envelopes. Ids derive from the cause, so deciding the
        same command again gives the same event ids (the store recognises its own write)."""
        return [self._envelope(e, cause) for e in self.collect_events()]

    def _envelope(self, event: object, cause: Cause) -> Envelope:
        if not isinstance(event, Aggregate.Event) or not isinstance(event, catalogue.Event):
            raise TypeError(f"{type(event).__qualname__} is not a catalogue event of {self.ref}")
        version = event.originator_version
        envelope = trusted(
            Envelope,
            {
                "event_id": event_id_for(cause.causation_id, self.aggregate_type, self.id, version),
                "name": event.event_name,
                "schema_version": event.schema_version,
                "aggregate_type": self.aggregate_type,
                "aggregate_id": self.id,
                "aggregate_version": version,
                "occurred_at": event.timestamp,
                "causation_id": cause.causation_id,
                "correlation_id": cause.correlation_id,
                "actor": cause.actor,
                "tenant": cause.tenant,
                "payload": event.model_dump(mode="json", exclude=LIBRARY_EXCLUDED),
            },
        )
        # A writer applies its own stored events to its folded state from the ack: the event
        # rides along (outside the model's fields, so never stored, dumped or compared) and is
        # applied as it is rather than validated again from its payload.
        object.__setattr__(envelope, BUILT_FROM, event)
        return envelope

    # ---- events from the wire ------------------------------------------------------------

    @classmethod
    def rehydrate(
        cls, envelopes: Iterable[Envelope], snapshot: Snapshot | None = None
    ) -> Self | None:
        """The aggregate from its snapshot (if any) and the events after it; None if neither
        says it exists. Events the snapshot already covers are skipped."""
        aggregate = cls.from_snapshot(snapshot) if snapshot is not None else None
        for envelope in envelopes:
            aggregate = cls._mutate(aggregate, envelope)
        return aggregate

    def evolve(self, envelopes: Iterable[Envelope]) -> None:
        """Apply stored events to this instance (a consumer following the log)."""
        for envelope in envelopes:
            self._mutate(self, envelope)

    @classmethod
    def _mutate(cls, aggregate: Self | None, envelope: Envelope) -> Self:
        if envelope.aggregate_type != cls.aggregate_type:
            raise ValueError(f"{envelope.name} is a {envelope.aggregate_type} event, not {cls}")
        if aggregate is not None and envelope.aggregate_version <= aggregate.version:
            return aggregate
        envelope = CATALOGUE.upcast(envelope)
        known = cls.creators if aggregate is None else cls.events_by_name
        event_class = known.get(envelope.name)
        if event_class is None:
            # Skipping it would leave a gap in the versions: refuse (the code may be too old).
            role = "start" if aggregate is None else "change"
            raise UnknownEventError(f"{envelope.name!r} cannot {role} a {cls.__name__}")
        built = envelope.__dict__.get(BUILT_FROM)
        version = envelope.aggregate_version
        if isinstance(built, event_class) and built.originator_version == version:
            mutated = built.mutate(aggregate)
        else:
            fields: dict[str, Any] = {
                **envelope.payload,
                "originator_id": envelope.aggregate_id,
                "originator_version": envelope.aggregate_version,
                "timestamp": envelope.occurred_at,
            }
            if issubclass(event_class, CanInitAggregate):
                fields["originator_topic"] = get_topic(cls)
            mutated = event_class.model_validate(fields).mutate(aggregate)
        if not isinstance(mutated, cls):
            raise TypeError(f"{envelope.name} did not produce a {cls.__name__}")
        return mutated

    # ---- snapshots -----------------------------------------------------------------------

    def state(self) -> BaseModel:
        """The domain attributes as the aggregate's ``State`` model."""
        names = self.State.model_fields
        return self.State.model_validate({name: getattr(self, name) for name in names})

    def snapshot(self, seq: int, now: datetime) -> Snapshot:
        """A snapshot at stream sequence ``seq``: the sequence of this aggregate's last stored
        event, so that it is also the guard for the next write after loading it."""
        if self.pending_events:
            raise ValueError(f"{self.ref} has undecided events; snapshot after they are stored")
        state = _SnapshotState(
            created_on=self.created_on,
            modified_on=self.modified_on,
            attributes=self.state().model_dump(mode="json"),
        )
        return Snapshot(
            aggregate_type=self.aggregate_type,
            aggregate_id=self.id,
            version=self.version,
            seq=seq,
            taken_at=now,
            state=state.model_dump(mode="json"),
        )

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Self:
        if snapshot.aggregate_type != cls.aggregate_type:
            raise ValueError(f"a {snapshot.aggregate_type} snapshot cannot restore {cls}")
        saved = _SnapshotState.model_validate(snapshot.state)
        aggregate = cls.__new__(cls)
        aggregate.__base_init__(snapshot.aggregate_id, snapshot.version, saved.created_on)
        aggregate.modified_on = saved.modified_on
        state = cls.State.model_validate(saved.attributes)
        for name in cls.State.model_fields:
            setattr(aggregate, name, getattr(state, name))
        return aggregate


def _nested_events(cls: type[Aggregate], *, creators: bool) -> dict[str, type[Aggregate.Event]]:
    """Wire name -> nested event class, checked once when the aggregate class is defined."""
    found: dict[str, type[Aggregate.Event]] = {}
    for value in vars(cls).values():
        if not (isinstance(value, type) and issubclass(value, Aggregate.Event)):
            continue
        if not issubclass(value, catalogue.Event):
            continue  # the library's bases, not events of ours
        if issubclass(value, CanInitAggregate) != creators:
            continue
        if value.aggregate_type != cls.aggregate_type:
            raise TypeError(f"{value.event_name} is a {value.aggregate_type} event, not {cls}")
        if value.event_name in found:
            raise TypeError(f"{cls.__name__} maps {value.event_name} twice")
        found[value.event_name] = value
    return found
