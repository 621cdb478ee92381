"""Events of the ``correction`` aggregate (``ev.correction.<id>``, one per corrected
aggregate, id derived from its subject): an operator's answer to a quarantined event, written
by the tenancy service. The log stays immutable; every consumer folds these and reads the held
aggregate again without the skipped event, or gives it up."""

from __future__ import annotations

from events.catalogue import Event, event
from schemas.subjects import AggregateType

CORRECTION = AggregateType.CORRECTION


@event("EventSkipped", CORRECTION)
class EventSkipped(Event):
    """Read ``subject`` without the event at stream sequence ``seq`` (it cannot be applied and
    never will be): consumers holding the aggregate fold it again from its first event."""

    subject: str
    seq: int
    reason: str = ""


@event("AggregateVoided", CORRECTION)
class AggregateVoided(Event):
    """Give ``subject`` up: consumers drop what they folded of it and ignore its events."""

    subject: str
    reason: str = ""
