"""The event catalogue: stable wire names, schema versions and upcasters.

A wire name never depends on a Python import path, so modules can move freely. Old shapes stay
in the log forever; upcasters lift them to the current version on load, so domain code only
ever sees the current shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from events.envelope import Envelope
from schemas.subjects import AggregateType

Payload = dict[str, Any]
Upcaster = Callable[[Payload], Payload]


class Event(BaseModel):
    """Base of every domain event payload: frozen, unknown fields ignored (old readers survive
    new fields), every field added later gets a default."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    event_name: ClassVar[str]
    schema_version: ClassVar[int]
    aggregate_type: ClassVar[AggregateType]


E = TypeVar("E", bound=type[Event])


class UnknownEventError(LookupError):
    pass


class Catalogue:
    def __init__(self) -> None:
        self._events: dict[str, type[Event]] = {}
        self._upcasters: dict[tuple[str, int], Upcaster] = {}

    def register(self, cls: type[Event]) -> None:
        name = cls.event_name
        if name in self._events and self._events[name] is not cls:
            raise ValueError(f"event name {name!r} is already used by {self._events[name]!r}")
        self._events[name] = cls

    def add_upcaster(self, name: str, from_version: int, upcaster: Upcaster) -> None:
        key = (name, from_version)
        if key in self._upcasters:
            raise ValueError(f"an upcaster for {name} v{from_version} is already registered")
        self._upcasters[key] = upcaster

    def event_class(self, name: str) -> type[Event]:
        try:
            return self._events[name]
        except KeyError:
            raise UnknownEventError(f"no event named {name!r} in the catalogue") from None

    def names(self) -> list[str]:
        return sorted(self._events)

    def classes(self) -> list[type[Event]]:
        return [self._events[name] for name in self.names()]

    def upcast(self, envelope: Envelope) -> Envelope:
        """Lift an envelope's payload step by step to the event's current schema version."""
        current = self.event_class(envelope.name).schema_version
        payload, version = envelope.payload, envelope.schema_version
        if version > current:
            raise UnknownEventError(
                f"{envelope.name} v{version} is newer than this code (v{current}); upgrade first"
            )
        while version < current:
            step = self._upcasters.get((envelope.name, version))
            if step is None:
                raise UnknownEventError(f"no upcaster for {envelope.name} v{version}")
            payload, version = step(dict(payload)), version + 1
        if version == envelope.schema_version:
            return envelope
        return envelope.model_copy(update={"payload": payload, "schema_version": version})

    def decode(self, envelope: Envelope) -> Event:
        upcast = self.upcast(envelope)
        return self.event_class(upcast.name).model_validate(upcast.payload)


CATALOGUE = Catalogue()


def event(name: str, aggregate: AggregateType, version: int = 1) -> Callable[[E], E]:
    """Class decorator: give an event its wire name and version and register it."""

    def register(cls: E) -> E:
        cls.event_name = name
        cls.schema_version = version
        cls.aggregate_type = aggregate
        CATALOGUE.register(cls)
        return cls

    return register


def upcaster(name: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    """Register ``fn`` as the step from ``from_version`` to ``from_version + 1`` of ``name``."""

    def register(fn: Upcaster) -> Upcaster:
        CATALOGUE.add_upcaster(name, from_version, fn)
        return fn

    return register
