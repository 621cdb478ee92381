"""The ``quota`` aggregate (``ev.quota.<scope kind>-<scope id>``): what one scope (keypair,
user, project or domain) holds, written only by the scheduler.

Holdings are dicts keyed by session id, never counters: queueing, reserving or releasing the
same session twice changes nothing, so a retried decision cannot count a session twice. Each
command takes many sessions and records one event for them: a decision pass writes one event
per scope, however many sessions it admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

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

Held = Literal["queued", "reserved"]
SUMS = "_sums"


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
        return self._sum("reserved")

    @property
    def queued_total(self) -> ResourceSlots:
        return self._sum("queued")

    def __eq__(self, other: object) -> bool:
        # The kept sums are a cache, present or not: equal holdings are equal quotas.
        return type(self) is type(other) and _state(self) == _state(other)

    __hash__ = None  # type: ignore[assignment]

    def _sum(self, held: Held) -> ResourceSlots:
        # Admission asks for every candidate and a scope may hold thousands of sessions: the
        # sums are computed once (after a load or a snapshot) and then kept by the events,
        # exactly (integer quanta).
        sums: dict[str, ResourceSlots] = self.__dict__.setdefault(SUMS, {})
        if held not in sums:
            sums[held] = total(getattr(self, held))
        return sums[held]

    def _put(self, held: Held, session_id: str, slots: ResourceSlots) -> None:
        self._take(held, session_id)
        getattr(self, held)[session_id] = slots
        sums: dict[str, ResourceSlots] = self.__dict__.get(SUMS, {})
        if held in sums:
            sums[held] = sums[held] + slots

    def _take(self, held: Held, session_id: str) -> None:
        slots = getattr(self, held).pop(session_id, None)
        sums: dict[str, ResourceSlots] = self.__dict__.get(SUMS, {})
        if slots is not None and held in sums:
            sums[held] = sums[held] - slots

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

    def queue(self, sessions: Mapping[str, ResourceSlots], now: datetime) -> bool:
        """Created sessions (id -> slots) wait for admission; one already queued or holding a
        reservation changes nothing. One event names them all."""
        new = {s: slots for s, slots in sessions.items() if not self.holds(s)}
        return bool(new) and self._trigger(self.SessionQueued, now, sessions=new)

    def dequeue(self, reasons: Mapping[str, str], now: datetime) -> bool:
        """Queued sessions (id -> why) leave the queue without being admitted."""
        gone = {s: why for s, why in reasons.items() if s in self.queued}
        return bool(gone) and self._trigger(self.SessionDequeued, now, sessions=gone)

    def reserve(self, sessions: Mapping[str, ResourceSlots], now: datetime) -> bool:
        """Hold slots for admitted sessions (id -> slots) and take them off the queue. Limits
        are the admitter's to check: the aggregate knows no policy, only what it holds."""
        new = {s: slots for s, slots in sessions.items() if s not in self.reserved}
        return bool(new) and self._trigger(self.Reserved, now, sessions=new)

    def release(self, reasons: Mapping[str, str], now: datetime) -> bool:
        """Ended sessions (id -> why) give their reservations back."""
        gone = {s: why for s, why in reasons.items() if s in self.reserved}
        return bool(gone) and self._trigger(self.Released, now, sessions=gone)

    def holds(self, session_id: str) -> bool:
        return session_id in self.queued or session_id in self.reserved

    # ---- events --------------------------------------------------------------------------

    class Opened(QuotaScopeOpened, Aggregate.Created):
        def apply(self, quota: Quota) -> None:
            quota.scope = self.scope
            quota.scope_id = self.scope_id

    class SessionQueued(QuotaSessionQueued, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            for session_id, slots in self.sessions.items():
                quota._put("queued", session_id, slots)

    class SessionDequeued(QuotaSessionDequeued, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            for session_id in self.sessions:
                quota._take("queued", session_id)

    class Reserved(QuotaReserved, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            for session_id, slots in self.sessions.items():
                quota._take("queued", session_id)
                quota._put("reserved", session_id, slots)

    class Released(QuotaReleased, Aggregate.Event):
        def apply(self, quota: Quota) -> None:
            for session_id in self.sessions:
                quota._take("reserved", session_id)


def _state(quota: Quota) -> dict[str, object]:
    return {name: value for name, value in vars(quota).items() if name != SUMS}
