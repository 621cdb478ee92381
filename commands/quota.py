"""The ``quota`` aggregate (``ev.quota.<scope kind>-<scope id>``): what one scope (keypair,
user, project or domain) holds, written only by the scheduler.

Holdings are dicts keyed by session id, never counters: queueing, reserving or releasing the
same session twice changes nothing, so a retried decision cannot count a session twice.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from events.domain.quota import (
    QuotaReleased,
    QuotaReserved,
    QuotaScopeOpened,
    QuotaSessionDequeued,
    QuotaSessionQueued,
)
from schemas.resources import ZERO, ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind, quota_id_for


def total(slots: dict[str, ResourceSlots]) -> ResourceSlots:
    found = ZERO
    for value in slots.values():
        found = found + value
    return found


class Quota(Aggregate):
    aggregate_type = AggregateType.QUOTA

    class State(BaseModel):
        scope: ScopeKind
        scope_id: str
        queued: dict[str, ResourceSlots]
        reserved: dict[str, ResourceSlots]

    def __init__(self) -> None:
        self.scope = ScopeKind.KEYPAIR
        self.scope_id = ""
        self.queued: dict[str, ResourceSlots] = {}
        """Keypair scope: sessions created and not yet admitted (max pending counts these)."""
        self.reserved: dict[str, ResourceSlots] = {}
        """Admitted sessions that have not ended: what the scope's limits count."""

    @property
    def used(self) -> ResourceSlots:
        return total(self.reserved)

    @property
    def queued_total(self) -> ResourceSlots:
        return total(self.queued)

    # ---- commands ------------------------------------------------------------------------

    @classmethod
    def open(cls, scope: ScopeKind, scope_id: str, now: datetime) -> Quota:
        return cls._create(
            cls.Opened,
            id=quota_id_for(scope, scope_id),
            timestamp=now,
            scope=scope,
            scope_id=scope_id,
        )

    def queue(self, session_id: str, slots: ResourceSlots, now: datetime) -> bool:
        """A created session waits for admission; queueing it again (or once it holds a
        reservation) changes nothing."""
        if session_id in self.queued or session_id in self.reserved:
            return False
        return self._trigger(self.SessionQueued, now, session_id=session_id, slots=slots)

    def dequeue(self, session_id: str, reason: str, now: datetime) -> bool:
        if session_id not in self.queued:
            return False
        return self._trigger(self.SessionDequeued, now, session_id=session_id, reason=reason)

    def reserve(self, session_id: str, slots: ResourceSlots, now: datetime) -> bool:
        """Hold ``slots`` for an admitted session (and take it off the queue). Limits are the
        admitter's to check: the aggregate knows no policy, only what it holds."""
        if session_id in self.reserved:
            return False
        return self._trigger(self.Reserved, now, session_id=session_id, slots=slots)

    def release(self, session_id: str, reason: str, now: datetime) -> bool:
        if session_id not in self.reserved:
            return False
        return self._trigger(self.Released, now, session_id=session_id, reason=reason)

    # ---- events --------------------------------------------------------------------------

    class Opened(QuotaScopeOpened, Aggregate.Created):
        def apply(self, quota: Quota) -> None:
            quota.scope = self.scope
            quota.scope_id = self.scope_id

    class SessionQueued(QuotaSessionQueued, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            quota.queued[self.session_id] = self.slots

    class SessionDequeued(QuotaSessionDequeued, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            quota.queued.pop(self.session_id, None)

    class Reserved(QuotaReserved, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            quota.queued.pop(self.session_id, None)
            quota.reserved[self.session_id] = self.slots

    class Released(QuotaReleased, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            quota.reserved.pop(self.session_id, None)
