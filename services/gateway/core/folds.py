"""The gateway's read-only folds of the log, each kept current by a follower: the tenancy
directory (``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``,
``ev.resource_policy.*``, ``ev.resource_group.*``, ``ev.image.*``), for authentication and
authorisation; and what each quota scope holds now (``ev.quota.>``: reservations and queued
sessions per scope, keyed by session id; ``ev.session.>``: which of them are placed), for the
quota queries. Reads only; the tenancy service and the scheduler are the writers.

Three numbers per scope, never mixed: *held* (reserved by sessions placed on a node: what
they hold now), *waiting* (asked for by sessions not placed yet, admitted or queued: what
they would hold), and the scope's *limit* (the directory's). Admission's own count, the
reserved total, is held plus the admitted part of waiting.
"""

from __future__ import annotations

import logging

from commands.directory import TENANCY_SUBJECTS, Directory
from events.bus import Bus
from events.catalogue import CATALOGUE
from events.domain.quota import (
    QuotaReleased,
    QuotaReserved,
    QuotaSessionDequeued,
    QuotaSessionQueued,
)
from events.domain.session import (
    SessionCancelled,
    SessionFailed,
    SessionRequeued,
    SessionScheduled,
    SessionTerminated,
)
from events.envelope import StoredEvent
from events.fold import Fold, FoldedState
from events.follower import Follower
from events.store import EventStore
from schemas.resources import ZERO, ResourceSlots
from schemas.subjects import AggregateType, events_of
from schemas.tenancy import ScopeKind, quota_id_for

log = logging.getLogger(__name__)

POLL_TIMEOUT_S = 1.0
RETRY_AFTER_S = 1.0
SYNC_TIMEOUT_S = 10.0


class DirectoryFeed:
    """The tenancy directory (``commands.directory.Directory``), kept current."""

    def __init__(self, bus: Bus, *, poll_timeout_s: float = 1.0) -> None:
        self.directory = Directory()
        self.fold = Fold(
            bus, self.directory, subjects=TENANCY_SUBJECTS, consumer="gateway-directory"
        )
        self._poll_timeout_s = poll_timeout_s
        self._follower = Follower(
            self.fold, EventStore(bus), poll_timeout_s=poll_timeout_s, retry_after_s=1.0
        )

    async def start(self) -> None:
        """Catch up with the log as it is now, then follow it."""
        target = await self.fold.catch_up(timeout=self._poll_timeout_s)
        d = self.directory
        log.info(
            "directory caught up at seq %d: %d domains, %d users, %d keypairs",
            target, len(d.domains), len(d.users), len(d.keypairs),
        )  # fmt: skip
        self._follower.start("gateway:directory")

    async def stop(self) -> None:
        await self._follower.stop()
        await self.fold.close()


PLACED = SessionScheduled.event_name
UNPLACED = frozenset(
    e.event_name for e in (SessionRequeued, SessionTerminated, SessionCancelled, SessionFailed)
)
"""Session events (by name, never decoded) that end its placement: requeued after a node
loss, or ended (its reservations are released in the same commit)."""


class QuotaHoldings(FoldedState):
    def __init__(self) -> None:
        super().__init__()
        self.reserved: dict[str, dict[str, ResourceSlots]] = {}
        """Quota id -> session id -> the slots reserved for it on that scope."""
        self.queued: dict[str, dict[str, ResourceSlots]] = {}
        """Quota id -> session id -> the slots of a session waiting for admission."""
        self.placed: set[str] = set()
        """Sessions placed on nodes and not ended (or requeued): their reservations are held;
        the others' are waiting."""

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        if envelope.aggregate_type is AggregateType.SESSION:
            if envelope.name == PLACED:
                self.placed.add(envelope.aggregate_id)
            elif envelope.name in UNPLACED:
                self.placed.discard(envelope.aggregate_id)
            return
        if envelope.aggregate_type is not AggregateType.QUOTA:
            return
        try:
            decoded = CATALOGUE.decode(envelope)
        except Exception as exc:
            # Visibility only: one unreadable event must not stop the others being shown.
            log.warning("cannot fold %s at seq %d: %r", envelope.name, event.seq, exc)
            return
        quota = envelope.aggregate_id
        # Each holding event names one session or many (v1 events are upcast to v2).
        if isinstance(decoded, QuotaSessionQueued):
            self.queued.setdefault(quota, {}).update(decoded.sessions)
        elif isinstance(decoded, QuotaSessionDequeued):
            for session_id in decoded.sessions:
                self.queued.get(quota, {}).pop(session_id, None)
        elif isinstance(decoded, QuotaReserved):
            # A reservation on the keypair scope also takes the session off its queue.
            for session_id, slots in decoded.sessions.items():
                self.queued.get(quota, {}).pop(session_id, None)
                self.reserved.setdefault(quota, {})[session_id] = slots
        elif isinstance(decoded, QuotaReleased):
            for session_id in decoded.sessions:
                self.reserved.get(quota, {}).pop(session_id, None)

    def use(self, kind: ScopeKind, scope_id: str) -> tuple[ResourceSlots, int, int]:
        quota = quota_id_for(kind, scope_id)
        reserved = self.reserved.get(quota, {})
        used = sum(reserved.values(), ZERO)
        return used, len(reserved), len(self.queued.get(quota, {}))

    def queued_slots(self, kind: ScopeKind, scope_id: str) -> ResourceSlots:
        return sum(self.queued.get(quota_id_for(kind, scope_id), {}).values(), ZERO)

    def held(self, kind: ScopeKind, scope_id: str) -> tuple[ResourceSlots, int]:
        reserved = self.reserved.get(quota_id_for(kind, scope_id), {})
        mine = [slots for sid, slots in reserved.items() if sid in self.placed]
        return sum(mine, ZERO), len(mine)

    def waiting(self, kind: ScopeKind, scope_id: str) -> tuple[ResourceSlots, int]:
        quota = quota_id_for(kind, scope_id)
        reserved = self.reserved.get(quota, {})
        admitted = [slots for sid, slots in reserved.items() if sid not in self.placed]
        queued = list(self.queued.get(quota, {}).values())
        return sum([*admitted, *queued], ZERO), len(admitted) + len(queued)


class QuotaUse:
    """The holdings, kept current by a ``Follower`` of the log (which logs a failed read and
    tries again)."""

    def __init__(
        self,
        bus: Bus,
        *,
        poll_timeout_s: float = POLL_TIMEOUT_S,
        retry_after_s: float = RETRY_AFTER_S,
    ) -> None:
        self.state = QuotaHoldings()
        self.fold = Fold(
            bus,
            self.state,
            subjects=[events_of(AggregateType.QUOTA), events_of(AggregateType.SESSION)],
            consumer="gateway-quotas",
        )
        self._poll_timeout_s = poll_timeout_s
        self._follower = Follower(
            self.fold, EventStore(bus), poll_timeout_s=poll_timeout_s, retry_after_s=retry_after_s
        )

    async def start(self) -> None:
        """Catch up with the log as it is now, then follow it."""
        await self.fold.catch_up(timeout=self._poll_timeout_s)
        self._follower.start("gateway:quotas")

    async def stop(self) -> None:
        await self._follower.stop()
        await self.fold.close()

    async def sync(self, timeout: float = SYNC_TIMEOUT_S) -> None:
        """Return once every quota event stored before this call is folded."""
        await self._follower.sync(timeout)

    def use(self, kind: ScopeKind, scope_id: str) -> tuple[ResourceSlots, int, int]:
        """(slots in use, sessions holding a reservation, sessions queued) on one scope."""
        return self.state.use(kind, scope_id)

    def queued_slots(self, kind: ScopeKind, scope_id: str) -> ResourceSlots:
        """The slots of the sessions queued on one scope (what max pending slots bounds)."""
        return self.state.queued_slots(kind, scope_id)

    def held(self, kind: ScopeKind, scope_id: str) -> ResourceSlots:
        """What the scope's sessions placed on nodes hold now."""
        return self.state.held(kind, scope_id)[0]

    def waiting(self, kind: ScopeKind, scope_id: str) -> ResourceSlots:
        """What the scope's sessions not placed yet ask for (admitted, or queued for
        admission): never counted as held, however long they wait."""
        return self.state.waiting(kind, scope_id)[0]

    def counts(self, kind: ScopeKind, scope_id: str) -> tuple[int, int]:
        """(sessions holding, sessions waiting) on one scope."""
        return self.state.held(kind, scope_id)[1], self.state.waiting(kind, scope_id)[1]
