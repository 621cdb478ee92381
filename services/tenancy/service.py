"""The tenancy service: the one writer of domains, projects, users, keypairs, resource
policies, resource groups and images.

Folds ``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``,
``ev.resource_policy.*``, ``ev.resource_group.*`` and ``ev.image.*`` into a ``Directory`` and
answers every tenancy command (``cmd.<those aggregates>.*``, one durable consumer) with a
``TenancyDecider`` (``writer``: who asks, the pure decider, one guarded commit through the
unit of work); a refusal a fresher directory might turn around is decided once more after
folding to the log's end. Writes those event subjects and ``out.<command id>`` via the runner.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from commands import admin as a
from commands.directory import TENANCY_SUBJECTS, Directory
from commands.messages import Command
from commands.outcome import Code, Decision, Rejected
from commands.runner import CommandRunner, Handler, HandlerContext, utc_now
from events.bus import Bus
from events.fold import Fold
from events.follower import Follower
from events.store import EventStore
from services.tenancy.routes import DECIDERS
from services.tenancy.settings import TenancySettings
from services.tenancy.writer import TenancyDecider

log = logging.getLogger(__name__)

# A refusal that a fresher directory might turn around (a name just created, a role just
# granted): fold up to the log's end once and decide again before saying it.
MAYBE_STALE = frozenset({Code.NOT_FOUND, Code.FORBIDDEN})
SYNC_TIMEOUT_S = 10.0


class TenancyService:
    def __init__(
        self,
        bus: Bus,
        settings: TenancySettings | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.settings = settings = settings or TenancySettings()
        self.directory = Directory()
        self.fold = Fold(bus, self.directory, subjects=TENANCY_SUBJECTS, consumer="tenancy")
        self.store = EventStore(bus)
        self.decider = TenancyDecider(self.store, self.directory, attempts=settings.attempts)
        handlers: dict[type[Command], Handler] = dict.fromkeys(DECIDERS, self.handle)
        self.runner = CommandRunner(
            bus, handlers, durable=settings.durable, aggregate_type=a.ADMIN_AGGREGATES,
            store=self.store, clock=clock, fetch_timeout=settings.command_fetch_timeout_s,
        )  # fmt: skip
        self._follower = Follower(
            self.fold, self.store,
            poll_timeout_s=settings.poll_timeout_s, retry_after_s=settings.poll_timeout_s,
        )  # fmt: skip
        self._stopped = False

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Catch up with the log, then follow it and take commands. A start that fails
        half-way stops what it started."""
        try:
            target = await self.fold.catch_up(timeout=self.settings.poll_timeout_s)
            d = self.directory
            log.info(
                "tenancy caught up at seq %d: %d domains, %d projects, %d users, %d keypairs",
                target, len(d.domains), len(d.projects), len(d.users), len(d.keypairs),
            )  # fmt: skip
            self._follower.start("tenancy:follow")
            await self.runner.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.runner.stop()
        await self._follower.stop()
        await self.fold.close()

    async def sync(self) -> None:
        """Return once everything stored before this call is folded."""
        await self._follower.sync(SYNC_TIMEOUT_S)

    # ---- deciding ------------------------------------------------------------------------

    async def handle(self, cmd: Command, ctx: HandlerContext) -> Decision:
        decision = await self.decider.decide(cmd, ctx.now)
        if isinstance(decision, Rejected) and decision.code in MAYBE_STALE:
            await self.sync()
            decision = await self.decider.decide(cmd, ctx.now)
        return decision
