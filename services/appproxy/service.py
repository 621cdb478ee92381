"""The app proxy's log side: fold ``ev.session.*`` and ``ev.agent.*`` into the route table
(``routes.py``) and keep following; a session that ends has its open WebSockets closed. Reads
only; writes nothing. Every replica folds the log itself (no durable consumer), so a restart
or a second replica serves the same routes."""

from __future__ import annotations

import logging

from events.bus import Bus
from events.envelope import StoredEvent
from events.fold import Fold, Follower
from events.store import EventStore
from services.appproxy.connections import Connections
from services.appproxy.routes import ENDING, SUBJECTS, RouteTable
from services.appproxy.settings import AppProxySettings

log = logging.getLogger(__name__)
SYNC_TIMEOUT_S = 10.0
ENDING_NAMES = frozenset(c.event_name for c in ENDING)


class RouteFold(Fold[RouteTable]):
    """A fold that, while following, closes the connections of each session that ends."""

    def __init__(self, bus: Bus, connections: Connections) -> None:
        super().__init__(bus, RouteTable(), subjects=SUBJECTS, consumer="appproxy")
        self._connections = connections

    async def poll(self, timeout: float = 1.0) -> list[StoredEvent]:
        applied = await super().poll(timeout)
        for event in applied:
            if event.name in ENDING_NAMES:
                closed = self._connections.end(event.envelope.aggregate_id)
                if closed:
                    log.info("appproxy: session %s ended; closing %d connection(s)",
                             event.envelope.aggregate_id, closed)  # fmt: skip
        return applied


class AppProxyService:
    def __init__(self, bus: Bus, settings: AppProxySettings) -> None:
        self.settings = settings
        self.connections = Connections()
        self.fold = RouteFold(bus, self.connections)
        self._follower = Follower(
            self.fold, EventStore(bus),
            poll_timeout_s=settings.poll_timeout_s, retry_after_s=settings.poll_timeout_s,
        )  # fmt: skip
        self._stopped = False

    @property
    def table(self) -> RouteTable:
        return self.fold.state

    async def start(self) -> None:
        try:
            target = await self.fold.catch_up(timeout=self.settings.poll_timeout_s)
            log.info("appproxy caught up at seq %d: %d routes", target, len(self.table.routes()))
            self._follower.start("appproxy:follow")
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self._follower.stop()
        await self.fold.close()

    async def sync(self) -> None:
        """Return once everything stored before this call is folded."""
        await self._follower.sync(SYNC_TIMEOUT_S)
