"""Events of the ``quota`` aggregate (``ev.quota.<scope kind>-<scope id>``): what one scope
(keypair, user, project or domain) holds. Written only by the scheduler's admission.

Holdings are sets keyed by session id, never counters: writing the same decision twice
changes nothing, and a replay can recompute every scope's use at every point of the log.

v2 of the holding events names every session one decision pass (or one run of creates)
changed on the scope, so a pass writes one event per scope, not one per session and scope.
v1 events (one session each) stay in old logs and are upcast on load.
"""

from __future__ import annotations

from events.catalogue import Event, Payload, event, upcaster
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind

QUOTA = AggregateType.QUOTA


@event("QuotaScopeOpened", QUOTA)
class QuotaScopeOpened(Event):
    scope: ScopeKind
    scope_id: str


@event("QuotaSessionQueued", QUOTA, version=2)
class QuotaSessionQueued(Event):
    """Sessions were created and wait for admission (keypair scope only): what max pending
    sessions and max pending slots count. Written with the sessions' creation."""

    sessions: dict[str, ResourceSlots]
    """Session id -> its total slots."""


@event("QuotaSessionDequeued", QUOTA, version=2)
class QuotaSessionDequeued(Event):
    """Queued sessions left the queue without being admitted (cancelled, refused)."""

    sessions: dict[str, str]
    """Session id -> why it left."""


@event("QuotaReserved", QUOTA, version=2)
class QuotaReserved(Event):
    """The sessions' slots are reserved on this scope (and, on the keypair scope, they left
    the queue). Written with their ``SessionAdmitted`` and the other scopes' reservations."""

    sessions: dict[str, ResourceSlots]
    """Session id -> the slots held for it."""


@event("QuotaReleased", QUOTA, version=2)
class QuotaReleased(Event):
    """The sessions ended: their reservations are gone."""

    sessions: dict[str, str]
    """Session id -> why it was released."""


@upcaster("QuotaSessionQueued", from_version=1)
def _queued_v1_to_v2(payload: Payload) -> Payload:
    return {"sessions": {payload["session_id"]: payload["slots"]}}


@upcaster("QuotaReserved", from_version=1)
def _reserved_v1_to_v2(payload: Payload) -> Payload:
    return {"sessions": {payload["session_id"]: payload["slots"]}}


@upcaster("QuotaSessionDequeued", from_version=1)
def _dequeued_v1_to_v2(payload: Payload) -> Payload:
    return {"sessions": {payload["session_id"]: payload.get("reason", "")}}


@upcaster("QuotaReleased", from_version=1)
def _released_v1_to_v2(payload: Payload) -> Payload:
    return {"sessions": {payload["session_id"]: payload.get("reason", "")}}
