"""Events of the ``quota`` aggregate (``ev.quota.<scope kind>-<scope id>``): what one scope
(keypair, user, project or domain) holds. Written only by the scheduler's admission.

Holdings are sets keyed by session id, never counters: writing the same decision twice
changes nothing, and a replay can recompute every scope's use at every point of the log.
"""

from __future__ import annotations

from events.catalogue import Event, event
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind

QUOTA = AggregateType.QUOTA


@event("QuotaScopeOpened", QUOTA)
class QuotaScopeOpened(Event):
    scope: ScopeKind
    scope_id: str


@event("QuotaSessionQueued", QUOTA)
class QuotaSessionQueued(Event):
    """A session was created and waits for admission (keypair scope only): what max pending
    sessions and max pending slots count. Written with the session's creation."""

    session_id: str
    slots: ResourceSlots


@event("QuotaSessionDequeued", QUOTA)
class QuotaSessionDequeued(Event):
    """A queued session left the queue without being admitted (cancelled, refused)."""

    session_id: str
    reason: str


@event("QuotaReserved", QUOTA)
class QuotaReserved(Event):
    """The session's slots are reserved on this scope (and, on the keypair scope, it left
    the queue). Written with ``SessionAdmitted`` and the other scopes' reservations."""

    session_id: str
    slots: ResourceSlots


@event("QuotaReleased", QUOTA)
class QuotaReleased(Event):
    """The session ended: its reservation is gone."""

    session_id: str
    reason: str
