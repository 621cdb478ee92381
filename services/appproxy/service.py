"""The app proxy's log side: fold ``ev.session.*``, ``ev.agent.*`` and ``ev.endpoint.*`` into
the route table (``routes.py``) and keep following; a session that ends has its open WebSockets
closed, and requests held at an endpoint look again after each poll that moved the table
(``endpoints/wake.Changes``). Every replica folds the log itself (no durable consumer), so a
restart or a second replica serves the same routes.

Writes only ``ev.activity.<proxy id>`` (``commands.activity_reports``): ``traffic`` notes each
proxied request or message, and every ``activity_interval_s`` the sessions that had any are
reported (source ``terminal`` or ``app``), which the scheduler's idle timeout reads. Claims
used URL tokens in, and follows revocations from, ``jy-app-grants`` (``grants.py``). Sends
``cmd.endpoint.wake`` for an endpoint scaled to zero that a request reached
(``endpoints/wake.Waker``), and publishes its load reports on core NATS
``jy.serving.load.<proxy id>`` every second (``endpoints/load_reports.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime

from commands.activity_reports import ActivityReports
from commands.bus import CommandBus
from events.bus import Bus
from events.envelope import StoredEvent
from events.fold import Fold
from events.follower import Follower
from events.store import EventStore
from schemas.activity import ActivitySource
from schemas.principal import Actor
from schemas.terminal_tokens import TERMINAL
from services.appproxy.connections import Connections
from services.appproxy.endpoints import load_reports
from services.appproxy.endpoints.balance import Balancer
from services.appproxy.endpoints.wake import Changes, Waker
from services.appproxy.grants import Grants
from services.appproxy.routes import ENDING, SUBJECTS, RouteTable
from services.appproxy.settings import AppProxySettings

log = logging.getLogger(__name__)
SYNC_TIMEOUT_S = 10.0
ENDING_NAMES = frozenset(c.event_name for c in ENDING)
APPPROXY_ACTOR = Actor.service("appproxy")


class RouteFold(Fold[RouteTable]):
    """A fold that, while following, closes the connections of each session that ends and
    pulses ``changes`` when the table moved."""

    def __init__(self, bus: Bus, connections: Connections) -> None:
        super().__init__(bus, RouteTable(), subjects=SUBJECTS, consumer="appproxy")
        self._connections = connections
        self.changes = Changes()

    async def poll(self, timeout: float = 1.0) -> list[StoredEvent]:
        applied = await super().poll(timeout)
        if applied:
            self.changes.pulse()
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
        self.activity = ActivityReports(EventStore(bus), settings.reporter_id(), APPPROXY_ACTOR)
        self.grants = Grants(bus, retry_after_s=settings.poll_timeout_s)
        self.balancer = Balancer()
        """Requests per endpoint and replica, in flight and since start (HTTP side counts)."""
        self.waker = Waker(CommandBus(bus), APPPROXY_ACTOR)
        self._bus = bus
        self._reporting: asyncio.Task[None] | None = None
        self._load_reports: asyncio.Task[None] | None = None
        self._stopped = False

    @property
    def table(self) -> RouteTable:
        return self.fold.state

    def traffic(self, session_id: str, app: str) -> None:
        """A request or WebSocket message to ``app`` of the session passed: noted (a dict
        entry, no I/O) and reported with the next interval's activity."""
        source = ActivitySource.TERMINAL if app == TERMINAL else ActivitySource.APP
        self.activity.note(session_id, None, source, time.time())

    async def start(self) -> None:
        try:
            target = await self.fold.catch_up(timeout=self.settings.poll_timeout_s)
            log.info("appproxy caught up at seq %d: %d routes", target, len(self.table.routes()))
            await self.grants.start(timeout_s=SYNC_TIMEOUT_S)
            self._follower.start("appproxy:follow")
            self._reporting = asyncio.create_task(
                self.activity.run(self.settings.activity_interval_s, _utc_now, self._running),
                name="appproxy:activity",
            )
            self._load_reports = asyncio.create_task(
                load_reports.publish_every_second(
                    self._bus, self.settings.reporter_id(), self.balancer, self.table.endpoints
                ),
                name="appproxy:load-reports",
            )
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        for task in (self._reporting, self._load_reports):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.waker.stop()
        await self.grants.stop()
        await self._follower.stop()
        await self.fold.close()

    async def sync(self) -> None:
        """Return once everything stored before this call is folded."""
        await self._follower.sync(SYNC_TIMEOUT_S)

    def _running(self, session_id: str, kernel_id: str | None) -> bool:
        # A session that ended (or never ran, as far as the log says) is not reported: the
        # table keeps no ended session.
        session = self.table.sessions.get(session_id)
        return session is not None and session.running


def _utc_now() -> datetime:
    return datetime.now(UTC)
