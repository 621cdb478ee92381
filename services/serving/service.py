"""The serving controller: the one writer of ``ev.endpoint.*``.

Folds ``ev.endpoint.*``, ``ev.session.*``, ``ev.agent.*`` and ``ev.activity.*`` (``state``);
answers ``cmd.endpoint.*`` (one durable consumer; any replica may take a command) with the
pure ``deciders``, each decision stored through the unit of work (a not-found a fresher fold
might turn around is decided once more after folding to the log's end); hears the app
proxies' load reports (core NATS ``jy.serving.load.*``); and, while it holds the ``serving``
lease in ``jy-leases``, reconciles (``reconciler``): probes, health, replacement, scaling,
rollouts and destruction, sending ``cmd.session.create`` and ``cmd.session.terminate``.
Writes ``ev.endpoint.<id>``, ``out.<command id>``, ``cmd.session.*`` and its lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import datetime

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from commands.bus import CommandBus
from commands.errors import DomainError
from commands.messages import Command
from commands.outcome import Accepted, Code, Decision, Rejected
from commands.runner import CommandRunner, Handler, HandlerContext, utc_now
from commands.serving.aggregate import (
    Endpoint,
    EndpointExistsError,
    TokenError,
    UnknownTokenError,
)
from commands.unit_of_work import Changes, UnitOfWork, answer, working_copy
from events.bus import Bus
from events.cancelling import cancelling
from events.fold import Fold
from events.follower import Follower
from events.leases import Lease
from events.store import EventStore
from schemas.ids import new_id
from schemas.serving_load import LoadBoard
from schemas.subjects import SERVING_LOAD_PREFIX, AggregateType
from services.serving.deciders import DECIDERS, endpoint_id_of
from services.serving.probes import Prober
from services.serving.reconciler import Reconciler
from services.serving.settings import ServingSettings
from services.serving.state import SUBJECTS, ServingState

log = logging.getLogger(__name__)

MAYBE_STALE = frozenset({Code.NOT_FOUND})
SYNC_TIMEOUT_S = 10.0


class ServingService:
    def __init__(
        self,
        bus: Bus,
        settings: ServingSettings | None = None,
        clock: Callable[[], datetime] = utc_now,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings = settings or ServingSettings()
        self._bus = bus
        self.state = state = ServingState()
        self.fold = Fold(bus, state, subjects=SUBJECTS, consumer="serving")
        self.store = EventStore(bus)
        self.work = UnitOfWork(
            self.store, state, lambda: Changes(state), attempts=settings.attempts
        )
        handlers: dict[type[Command], Handler] = dict.fromkeys(DECIDERS, self.handle)
        self.runner = CommandRunner(
            bus, handlers, durable=settings.durable, aggregate_type=AggregateType.ENDPOINT,
            store=self.store, clock=clock, fetch_timeout=settings.command_fetch_timeout_s,
        )  # fmt: skip
        self._follower = Follower(
            self.fold, self.store,
            poll_timeout_s=settings.poll_timeout_s, retry_after_s=settings.poll_timeout_s,
        )  # fmt: skip
        self.board = LoadBoard(wall)
        self.prober = Prober()
        self.reconciler = Reconciler(
            state, self.work, CommandBus(bus), self.board, self.prober, clock,
            resend_after_s=settings.resend_after_s, drain_timeout_s=settings.drain_timeout_s,
        )  # fmt: skip
        self.holder = f"{settings.durable}-{new_id()[:8]}"
        self.lease = Lease(bus, settings.lease_key, self.holder, settings.lease_ttl_s)
        self._wake = asyncio.Event()
        state.wake = self._wake.set
        self._loads: Subscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Catch up with the log, then follow it, hear the load reports, reconcile and take
        commands. A start that fails half-way stops what it started."""
        try:
            target = await self.fold.catch_up(timeout=self.settings.poll_timeout_s)
            log.info(
                "serving caught up at seq %d: %d endpoints, %d replica sessions",
                target, len(self.state.endpoints), len(self.state.sessions),
            )  # fmt: skip
            self._follower.start("serving:follow")
            self._loads = await self._bus.nc.subscribe(
                f"{SERVING_LOAD_PREFIX}.*", cb=self._load_report
            )
            self._task = asyncio.create_task(self._reconcile(), name="serving:reconcile")
            await self.runner.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        await self.runner.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._loads is not None:
            with contextlib.suppress(Exception):
                await self._loads.unsubscribe()
        await self.lease.release()
        await self.prober.close()
        await self._follower.stop()
        await self.fold.close()

    async def sync(self) -> None:
        """Return once everything stored before this call is folded."""
        await self._follower.sync(SYNC_TIMEOUT_S)

    async def _load_report(self, msg: Msg) -> None:
        self.board.take(msg.data)

    # ---- commands ------------------------------------------------------------------------

    async def handle(self, cmd: Command, ctx: HandlerContext) -> Decision:
        decision = await self._decide(cmd, ctx)
        if isinstance(decision, Rejected) and decision.code in MAYBE_STALE:
            await self.sync()
            decision = await self._decide(cmd, ctx)
        return decision

    async def _decide(self, cmd: Command, ctx: HandlerContext) -> Decision:
        endpoint_id = endpoint_id_of(cmd)

        def decide(changes: Changes) -> Decision:
            folded = self.state.endpoints.get(endpoint_id)
            endpoint = changes.track(folded) if folded is not None else None
            try:
                made = DECIDERS[type(cmd)](cmd, endpoint, ctx.now())
            except DomainError as exc:
                return Rejected(_code(exc), str(exc))
            if isinstance(made, Rejected):
                return made
            if folded is None:
                changes.add(made)
            changes.unit(cmd.cause(), made)
            return Accepted((), (), f"endpoint {made.name}: {made.status().value}")

        what = f"{cmd.command_name()} {cmd.command_id}"
        return answer(*await self.work.run(decide, what=what))

    # ---- reconciling ---------------------------------------------------------------------

    async def _reconcile(self) -> None:
        while not cancelling():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.tick_s)
            self._wake.clear()
            try:
                if await self._hold_lease():
                    await self.reconciler.run_pass()
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                log.exception("serving: a reconcile pass failed; trying again")
                await asyncio.sleep(self.settings.tick_s)

    async def _hold_lease(self) -> bool:
        lease = self.lease
        if lease.held and lease.remaining_s > lease.ttl_s / 2:
            return True
        return await lease.acquire()

    def endpoint(self, endpoint_id: str) -> Endpoint | None:
        """A copy of the endpoint as folded (for tests and read-only callers)."""
        found = self.state.endpoints.get(endpoint_id)
        return working_copy(found) if found is not None else None


def _code(refusal: DomainError) -> str:
    if isinstance(refusal, UnknownTokenError):
        return Code.NOT_FOUND
    if isinstance(refusal, EndpointExistsError | TokenError):
        return Code.CONFLICT
    return Code.REFUSED
