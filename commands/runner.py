"""Runs one service's command handlers: reads ``cmd.<aggregate>.*`` (one aggregate type or
several) from ``JY_COMMANDS`` with a durable pull consumer, writes exactly one outcome per
command to ``out.<command id>`` (``JY_OUTCOMES``) and parks poison commands on
``parked.<command id>`` (``JY_PARKED``).

A command is acked only once its outcome is stored, so a crash at any point means a
redelivery, and a redelivery of a decided command finds its outcome and is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext, api
from nats.js.errors import APIError, NotFoundError
from pydantic import ValidationError

from commands.bus import CommandBus
from commands.errors import DomainError
from commands.messages import (
    COMMAND_NAME_HEADER,
    Command,
    UnknownCommandError,
    command_id_of,
    explain,
    parse_command,
)
from commands.outcome import Code, Decision, Outcome, Rejected
from events.bus import Bus
from events.store import EXPECTED_HEADER, WRONG_LAST_SEQUENCE, EventStore
from schemas.subjects import (
    COMMANDS_STREAM,
    OUTCOMES_STREAM,
    PARKED_STREAM,
    AggregateType,
    commands_of,
    outcome_subject,
    parked_subject,
)

log = logging.getLogger(__name__)

PARK_REASON_HEADER = "Jy-Park-Reason"
PARK_ERROR_HEADER = "Jy-Park-Error"
PARK_DELIVERIES_HEADER = "Jy-Deliveries"
PARK_SUBJECT_HEADER = "Jy-Command-Subject"
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class HandlerContext:
    """What a handler may use: the event store and the clock (handlers never read the time
    themselves, so tests can pin it)."""

    store: EventStore
    clock: Callable[[], datetime] = utc_now

    def now(self) -> datetime:
        return self.clock()


Handler = Callable[[Any, HandlerContext], Awaitable[Decision]]
"""``async def create_session(cmd: CreateSession, ctx: HandlerContext) -> Decision``.
A refusal is returned as ``Rejected`` (or raised as a ``DomainError``, which becomes one);
any other exception means "try again later"."""


@dataclass
class RunnerStats:
    handled: int = 0
    skipped: int = 0  # the outcome already existed: a redelivery or a re-send
    invalid: int = 0
    retried: int = 0
    parked: int = 0
    outcomes_written: int = 0
    outcomes_found: int = 0  # the guard found another runner's outcome (10071)


@dataclass(frozen=True, slots=True)
class Retry:
    """How often a failing command is tried, and how long to wait between tries."""

    max_deliver: int = 5
    backoff: tuple[float, ...] = (5.0, 15.0, 30.0, 60.0)

    def __post_init__(self) -> None:
        if not self.backoff or self.max_deliver <= len(self.backoff):
            # The server's own rule; said here with the fix instead of as a 10116 at start.
            raise ValueError("give at least one backoff delay and max_deliver > len(backoff)")

    def delay(self, deliveries: int) -> float:
        return self.backoff[min(deliveries, len(self.backoff)) - 1]


@dataclass
class CommandRunner:
    bus: Bus
    handlers: Mapping[type[Command], Handler]
    durable: str
    # One type, or several served by the same consumer (the gateway's admin module).
    aggregate_type: AggregateType | tuple[AggregateType, ...]
    store: EventStore | None = None
    clock: Callable[[], datetime] = utc_now
    retry: Retry = field(default_factory=Retry)
    batch: int = 256
    fetch_timeout: float = 1.0
    stats: RunnerStats = field(default_factory=RunnerStats, init=False)

    def __post_init__(self) -> None:
        self.ctx = HandlerContext(self.store or EventStore(self.bus), self.clock)
        self._commands = CommandBus(self.bus)
        self._task: asyncio.Task[None] | None = None
        self._subs: list[Subscription | JetStreamContext.PullSubscription] = []
        self._stopping = False
        self._fetching = False
        # The server redelivers a message unacked for backoff[n] seconds, so every message of
        # the batch in hand says "still working" well within the shortest of them.
        self._claim_every = min(self.retry.backoff) / 3

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Create (or bind) the durable consumer and start working in a background task."""
        config = api.ConsumerConfig(
            durable_name=self.durable,
            **self._filter(),
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            max_deliver=self.retry.max_deliver,
            backoff=list(self.retry.backoff),
        )
        await self.bus.js.add_consumer(COMMANDS_STREAM, config)
        advisory = f"{MAX_DELIVERIES_ADVISORY}.{COMMANDS_STREAM}.{self.durable}"
        self._subs.append(await self.bus.nc.subscribe(advisory, cb=self._on_exhausted))
        psub = await self.bus.js.pull_subscribe_bind(self.durable, stream=COMMANDS_STREAM)
        self._subs.append(psub)
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
        for sub in self._subs:
            with contextlib.suppress(nats.errors.Error):
                await sub.unsubscribe()
        self._subs.clear()

    async def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until the consumer has nothing left to deliver and nothing unacked."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            info = await self.bus.js.consumer_info(COMMANDS_STREAM, self.durable)
            if info.num_pending == 0 and info.num_ack_pending == 0:
                return
            if loop.time() > deadline:
                raise TimeoutError(f"{self.durable} still busy after {timeout}s: {info}")
            await asyncio.sleep(0.05)

    async def _run(self, psub: JetStreamContext.PullSubscription) -> None:
        while not self._stopping:
            self._fetching = True
            try:
                msgs: list[Msg] = await psub.fetch(self.batch, timeout=self.fetch_timeout)
            except TimeoutError:  # nothing to do (nats-py raises its own and asyncio's)
                continue
            except Exception as exc:
                # The loop must outlive a lost connection: the messages wait on the server.
                log.warning("%s: fetch failed (%r); trying again", self.durable, exc)
                await asyncio.sleep(self.fetch_timeout)
                continue
            finally:
                self._fetching = False
            await self._handle_batch(msgs)

    async def _handle_batch(self, msgs: list[Msg]) -> None:
        waiting = deque(msgs)
        keeper = asyncio.create_task(self._keep_claimed(waiting))
        try:
            while waiting:
                try:
                    await self._process(waiting[0])
                except Exception as exc:
                    await self._failed(waiting[0], exc)
                waiting.popleft()
        finally:
            keeper.cancel()

    async def _keep_claimed(self, waiting: deque[Msg]) -> None:
        while True:
            await asyncio.sleep(self._claim_every)
            for msg in list(waiting):
                with contextlib.suppress(nats.errors.Error):
                    await msg.in_progress()

    # ---- one command ---------------------------------------------------------------------

    async def _process(self, msg: Msg) -> None:
        try:
            cmd = parse_command(msg.subject, msg.data)
        except (UnknownCommandError, ValidationError) as exc:
            # Retrying cannot fix a malformed command: say why once, and ack.
            self.stats.invalid += 1
            command_id = command_id_of(msg.data, msg.headers)
            if await self._commands.outcome(command_id) is None:
                invalid = Outcome.rejected(command_id, Code.INVALID, explain(exc), self.ctx.now())
                await self._write(invalid)
            await msg.ack()
            return
        if await self._commands.outcome(cmd.command_id) is not None:
            self.stats.skipped += 1
            await msg.ack()
            return
        handler = self.handlers.get(type(cmd))
        if handler is None:
            unsupported = f"{self.durable} cannot {cmd.command_name()}"
            decision: Decision = Rejected(Code.UNSUPPORTED, unsupported)
        else:
            try:
                decision = await handler(cmd, self.ctx)
            except DomainError as exc:
                # A rule said no: retrying would say no again, so it is an outcome, not a
                # failure. Handlers may still return their own, more specific Rejected.
                decision = Rejected(Code.REFUSED, str(exc))
        self.stats.handled += 1
        await self._write(Outcome.of(cmd.command_id, decision, self.ctx.now()))
        await msg.ack()

    async def _failed(self, msg: Msg, exc: Exception) -> None:
        deliveries = msg.metadata.num_delivered
        reason = f"{type(exc).__name__}: {exc}"
        if deliveries < self.retry.max_deliver:
            self.stats.retried += 1
            log.warning("%s: attempt %d failed (%s); retrying", msg.subject, deliveries, reason)
            with contextlib.suppress(nats.errors.Error):
                await msg.nak(delay=self.retry.delay(deliveries))
            return
        try:
            error = type(exc).__name__
            await self._park(msg.subject, msg.data, msg.headers, deliveries, error, reason)
        except Exception:
            # Unacked at its last delivery: the server's max-deliveries advisory brings it back
            # to _on_exhausted (here or in a replica), which parks it then.
            log.exception("%s: could not park after %d deliveries", msg.subject, deliveries)
            return
        await msg.term()

    async def _park(
        self, subject: str, data: bytes, headers: dict[str, str] | None, deliveries: int,
        error: str, reason: str,
    ) -> None:  # fmt: skip
        """Keep the command with the reason it failed, and tell its sender with an outcome."""
        command_id = command_id_of(data, headers)
        park_headers = {
            # Replicas parking the same command store it once.
            "Nats-Msg-Id": command_id,
            # A header value ends at a line break: one line, and bounded.
            PARK_REASON_HEADER: " ".join(reason.split())[:1024],
            PARK_ERROR_HEADER: error,
            PARK_DELIVERIES_HEADER: str(deliveries),
            PARK_SUBJECT_HEADER: subject,
            COMMAND_NAME_HEADER: (headers or {}).get(COMMAND_NAME_HEADER, "unknown"),
        }
        await self.bus.js.publish(
            parked_subject(command_id), data, stream=PARKED_STREAM, headers=park_headers
        )
        self.stats.parked += 1
        log.error("parked command %s (%s) after %d deliveries: %s", command_id, subject,
                  deliveries, reason)  # fmt: skip
        message = f"the command failed {deliveries} times and was parked: {reason}"
        await self._write(Outcome.rejected(command_id, Code.PARKED, message, self.ctx.now()))

    async def _on_exhausted(self, advisory: Msg) -> None:
        """A command used its last delivery without an answer (its runner died or hung)."""
        try:
            body = json.loads(advisory.data)
            seq, deliveries = int(body["stream_seq"]), int(body["deliveries"])
            try:
                stored = await self.bus.js.get_msg(COMMANDS_STREAM, seq)
            except NotFoundError:
                return  # acked after all, or a replica already dealt with it
            data, headers = stored.data or b"", stored.headers
            if await self._commands.outcome(command_id_of(data, headers)) is None:
                reason = f"no answer after {deliveries} deliveries (the runner died or hung)"
                subject = stored.subject or ""
                await self._park(subject, data, headers, deliveries, "NoAnswer", reason)
            # A work queue keeps an exhausted message forever; it is parked now, so drop it.
            with contextlib.suppress(NotFoundError, APIError):
                await self.bus.js.delete_msg(COMMANDS_STREAM, seq)
        except Exception:
            log.exception("%s: could not park an exhausted command: %r", self.durable, advisory)

    async def _write(self, outcome: Outcome) -> None:
        """Store the one outcome: expected sequence 0, so a second writer is refused."""
        try:
            await self.bus.js.publish(
                outcome_subject(outcome.command_id),
                outcome.model_dump_json().encode(),
                stream=OUTCOMES_STREAM,
                headers={EXPECTED_HEADER: "0"},
            )
        except APIError as exc:
            if exc.err_code != WRONG_LAST_SEQUENCE:
                raise
            self.stats.outcomes_found += 1
            log.info("outcome of %s was already written; keeping that one", outcome.command_id)
            return
        self.stats.outcomes_written += 1
