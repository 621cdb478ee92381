"""The gateway's read-only folds of the log, each kept current by a follower: the tenancy
directory (``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``,
``ev.resource_policy.*``, ``ev.resource_group.*``, ``ev.image.*``), for authentication and
authorisation; and what each quota scope holds now (``ev.quota.>``: reservations and queued
sessions per scope, keyed by session id), for the quota queries. Reads only; the tenancy
service is the writer.
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


class QuotaHoldings(FoldedState):
    def __init__(self) -> None:
        super().__init__()
        self.reserved: dict[str, dict[str, ResourceSlots]] = {}
        """Quota id -> session id -> the slots reserved for it on that scope."""
        self.queued: dict[str, dict[str, ResourceSlots]] = {}
        """Quota id -> session id -> the slots of a session waiting for admission."""

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
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
            bus, self.state, subjects=[events_of(AggregateType.QUOTA)], consumer="gateway-quotas"
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
