"""The tenancy service: the one writer of domains, projects, users, keypairs, resource
policies, resource groups and images.

Folds ``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``,
``ev.resource_policy.*``, ``ev.resource_group.*`` and ``ev.image.*`` into a ``Directory`` and
answers every tenancy command (``cmd.<those aggregates>.*``, one durable consumer): checks who
asks, decides with the pure function ``routes.DECIDERS`` names, and stores the decision
through the unit of work (one guarded commit, applied from the ack, decided again after a
conflict). Writes those event subjects and ``out.<command id>`` via the runner.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from commands import admin as a
from commands.directory import TENANCY_SUBJECTS, Directory
from commands.messages import Command
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.runner import CommandRunner, Handler, HandlerContext, utc_now
from commands.tenancy import InvalidSettingsError
from commands.unit_of_work import Changes, UnitOfWork
from events.bus import Bus
from events.fold import Fold, Follower
from events.store import EventStore
from schemas.principal import ActorKind
from services.tenancy import common
from services.tenancy.routes import DECIDERS
from services.tenancy.settings import TenancySettings

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
        self.fold = Fold(bus, self.directory, subjects=TENANCY_SUBJECTS)
        self.store = EventStore(bus)
        self.work = UnitOfWork(
            self.store, self.directory, lambda: Changes(self.directory),
            attempts=settings.attempts,
        )  # fmt: skip
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
        decision = await self._decide_and_store(cmd, ctx)
        if isinstance(decision, Rejected) and decision.code in MAYBE_STALE:
            await self.sync()
            decision = await self._decide_and_store(cmd, ctx)
        return decision

    async def _decide_and_store(self, cmd: Command, ctx: HandlerContext) -> Decision:
        def decide(changes: Changes) -> Decision:
            decided = self._decide(cmd, ctx.now())
            if isinstance(decided, Rejected):
                return decided
            changes.unit(cmd.cause(), *decided.aggregates)
            return Accepted((), (), decided.message)

        what = f"{cmd.command_name()} {cmd.command_id}"
        decision, stored = await self.work.run(decide, what=what)
        if isinstance(decision, Accepted) and stored.batches:
            return Accepted.of(stored.merged(), decision.message)
        return decision

    def _decide(self, cmd: Any, now: datetime) -> common.Decision:
        who = None
        if cmd.actor.kind is not ActorKind.SERVICE:
            who = self.directory.principal(cmd.actor)
            if who is None:
                actor = f"{cmd.actor.kind.value} {cmd.actor.id}"
                return Rejected(Code.FORBIDDEN, f"{actor} is unknown or deactivated")
        try:
            return DECIDERS[type(cmd)](cmd, self.directory, who, now)
        except InvalidSettingsError as exc:
            return Rejected(Code.INVALID, str(exc))
