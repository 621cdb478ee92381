"""Runs one service's command handlers: reads ``cmd.<aggregate>.*`` (one aggregate type or
several) from ``JY_COMMANDS`` with a durable pull consumer, writes exactly one outcome per
command to ``out.<command id>`` (``JY_OUTCOMES``) and parks poison commands on
``parked.<command id>`` (``JY_PARKED``).

A command is acked only once its outcome is stored, so a crash at any point means a
redelivery, and a redelivery of a decided command finds its outcome and is skipped. A command
that keeps failing is retried with back-off and then parked (``commands.parking``).

Command types with a batch handler are decided in runs: consecutive commands of that type in
a fetched batch go to the handler together (one decision, one group commit), their outcomes
are looked up and stored together (pipelined, each still guarded), then they are acked. A
run whose handler fails is decided again one command at a time, so a poison command fails
(and is parked) alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext, api

from commands.dispatch import BatchHandler as BatchHandler
from commands.dispatch import Dispatcher
from commands.dispatch import Handler as Handler
from commands.dispatch import HandlerContext as HandlerContext
from commands.dispatch import utc_now as utc_now
from commands.messages import Command, UnknownCommandError, command_class
from commands.outcome import Outcome
from commands.outcome_log import OutcomeLog
from commands.parking import Parking, Retry
from events.bus import Bus
from events.cancelling import cancelling
from events.store import EventStore
from schemas.subjects import COMMANDS_STREAM, AggregateType, commands_of

log = logging.getLogger(__name__)

HOLD_PAUSE_S = 0.25
QUEUED_WAIT_S = 0.05
"""The longest a fetch waits for the commands the server said were queued behind the first."""
HOLD_PAUSE_MAX_S = 2.0


@dataclass
class RunnerStats:
    handled: int = 0
    skipped: int = 0  # the outcome already existed: a redelivery or a re-send
    invalid: int = 0
    retried: int = 0
    parked: int = 0
    outcomes_written: int = 0
    outcomes_found: int = 0  # the guard found another runner's outcome (10071)
    held: int = 0  # tries held back while the log was out of reach


@dataclass
class CommandRunner:
    bus: Bus
    handlers: Mapping[type[Command], Handler]
    durable: str
    # One type, or several served by the same consumer (the tenancy service).
    aggregate_type: AggregateType | tuple[AggregateType, ...]
    store: EventStore | None = None
    clock: Callable[[], datetime] = utc_now
    retry: Retry = field(default_factory=Retry)
    batch: int = 256
    fetch_timeout: float = 1.0
    batch_handlers: Mapping[type[Command], BatchHandler] = field(default_factory=dict)
    stats: RunnerStats = field(default_factory=RunnerStats, init=False)

    def __post_init__(self) -> None:
        self.ctx = HandlerContext(self.store or EventStore(self.bus), self.clock)
        outcomes = OutcomeLog(self.bus, timeout=self.bus.settings.request_timeout_s)
        self._parking = Parking(
            self.bus, self.durable, self.retry, self.stats, self._write, self.ctx.now
        )
        self._dispatcher = Dispatcher(
            self.durable, self.handlers, self.batch_handlers, self.ctx, outcomes,
            self._parking, self.stats,
        )  # fmt: skip
        self._task: asyncio.Task[None] | None = None
        self._subs: list[Subscription | JetStreamContext.PullSubscription] = []
        self._stopping = False
        self._fetching = False
        # The server redelivers a message unacked for backoff[n] seconds, so every message of
        # the batch in hand says "still working" well within the shortest of them.
        self._claim_every = min(self.retry.backoff) / 3

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Create (or bind) the durable consumer and start working in a background task. A
        start that fails takes back its subscriptions (the durable stays, as after ``stop``)."""
        config = api.ConsumerConfig(
            durable_name=self.durable,
            **self._filter(),
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            max_deliver=-1,  # counted by the runner (commands.parking): nothing is left stranded
            backoff=list(self.retry.backoff),
        )
        await self.bus.js.add_consumer(COMMANDS_STREAM, config)
        try:
            psub = await self.bus.js.pull_subscribe_bind(self.durable, stream=COMMANDS_STREAM)
            self._subs.append(psub)
        except BaseException:
            await self._unsubscribe()
            raise
        self._task = asyncio.create_task(self._run(psub), name=f"commands:{self.durable}")

    def _filter(self) -> dict[str, Any]:
        types = self.aggregate_type
        if isinstance(types, AggregateType):
            return {"filter_subject": commands_of(types)}
        if not types:
            raise ValueError(f"{self.durable}: name at least one aggregate type")
        subjects = sorted({commands_of(t) for t in types})
        if len(subjects) == 1:
            return {"filter_subject": subjects[0]}
        # Several filters on one consumer (server >= 2.10) keep one durable, one ordering.
        return {"filter_subjects": subjects}

    async def stop(self, grace: float = 30.0) -> None:
        """Finish the batch in hand (its commands are acked or nacked), then stop. After
        ``grace`` seconds a hung handler is cancelled: its command is redelivered later."""
        self._stopping = True
        if self._task is not None:
            if self._fetching:
                self._task.cancel()
            if not (await asyncio.wait({self._task}, timeout=grace))[0]:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._unsubscribe()

    async def _unsubscribe(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        self._subs.clear()

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until every command on the consumer's subjects is answered: on the work queue
        an acked command is gone. (The stream is asked, not the consumer: its pending counts
        lag a publish for a moment, so a command just sent could read as idle.)"""
        filters = self._filter()
        subjects: list[str] = filters.get("filter_subjects") or [filters["filter_subject"]]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = 0
            for subject in subjects:
                info = await self.bus.js.stream_info(COMMANDS_STREAM, subjects_filter=subject)
                left += sum((info.state.subjects or {}).values())
            if not left:
                return
            if loop.time() > deadline:
                raise TimeoutError(f"{self.durable}: {left} command(s) unanswered after {timeout}s")
            await asyncio.sleep(0.05)

    async def _run(self, psub: JetStreamContext.PullSubscription) -> None:
        while not self._stopping and not cancelling():
            self._fetching = True
            try:
                msgs = await self._fetch(psub)
            except TimeoutError:  # nothing to do (nats-py raises its own and asyncio's)
                continue
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                # The loop must outlive a lost connection: the messages wait on the server.
                log.warning("%s: fetch failed (%r); trying again", self.durable, exc)
                await asyncio.sleep(self.fetch_timeout)
                continue
            finally:
                self._fetching = False
            await self._handle_batch(msgs)

    async def _fetch(self, psub: JetStreamContext.PullSubscription) -> list[Msg]:
        """The next batch: the first command as soon as it is there, then what is queued behind
        it. (A long poll for a whole batch would hold a lone command back: nats-py keeps such
        a request open for the rest of the batch after the first message arrives.)"""
        msgs: list[Msg] = await psub.fetch(1, timeout=self.fetch_timeout)
        if self.batch > 1 and msgs and msgs[-1].metadata.num_pending:
            with contextlib.suppress(TimeoutError):
                msgs += await psub.fetch(self.batch - 1, timeout=QUEUED_WAIT_S)
        return msgs

    async def _handle_batch(self, msgs: list[Msg]) -> None:
        waiting = deque(msgs)
        keeper = asyncio.create_task(self._keep_claimed(waiting))
        try:
            while waiting:
                run = self._run_at(waiting)
                await self._decide_holding(run)
                for _ in run:
                    waiting.popleft()
        finally:
            keeper.cancel()

    async def _decide_holding(self, run: list[Msg]) -> None:
        """Decide ``run``; what was held back because the log was out of reach (a leader
        election, no quorum) is tried again after a pause, in order, while the keeper keeps
        it claimed, until it is answered or the runner stops (then the server redelivers it
        after the ack wait). The commands behind it wait: their order is kept."""
        pause = HOLD_PAUSE_S
        while run:
            try:
                run = await self._dispatcher.decide_run(run)
            except Exception:
                # Unacked commands come back after the ack wait (e.g. the connection
                # was lost mid-run); the loop carries on with the rest.
                log.exception("%s: a run of %d was left unanswered", self.durable, len(run))
                return
            if not run or self._stopping or cancelling():
                return
            self.stats.held += len(run)
            await asyncio.sleep(pause)
            pause = min(pause * 2, HOLD_PAUSE_MAX_S)

    def _run_at(self, waiting: deque[Msg]) -> list[Msg]:
        """The commands at the front that are decided together: consecutive ones of a type
        with a batch handler (commands keep their order), or else the first one alone."""
        kind = self._batchable(waiting[0])
        if kind is None:
            return [waiting[0]]
        run: list[Msg] = []
        for msg in waiting:
            if self._batchable(msg) is not kind:
                break
            run.append(msg)
        return run

    def _batchable(self, msg: Msg) -> type[Command] | None:
        try:
            kind = command_class(msg.subject)
        except UnknownCommandError:
            return None
        return kind if kind in self.batch_handlers else None

    async def _keep_claimed(self, waiting: deque[Msg]) -> None:
        while True:
            await asyncio.sleep(self._claim_every)
            for msg in list(waiting):
                with contextlib.suppress(nats.errors.Error):
                    await msg.in_progress()

    async def _write(self, outcome: Outcome) -> None:
        await self._dispatcher.write(outcome)
