"""Dispatching commands to their handlers for a runner (``commands.runner``): a run of commands
(or one) is parsed, checked against the outcomes already stored, decided by its batch handler or
handler, and answered: every outcome stored (``out.<command id>`` in ``JY_OUTCOMES``, guarded so
that a command never gets two), then each command acked. A command that fails goes to parking
(``commands.parking``); a malformed one is answered ``invalid`` at once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import nats.errors
from nats.aio.msg import Msg
from pydantic import ValidationError

from commands.errors import DomainError
from commands.messages import Command, UnknownCommandError, command_id_of, explain, parse_command
from commands.outcome import Code, Decision, Outcome, Rejected
from commands.outcome_log import OutcomeLog
from commands.parking import Parking
from events.bus import is_unavailable
from events.writes import Store

log = logging.getLogger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class HandlerContext:
    """What a handler may use: the event store and the clock (handlers never read the time
    themselves, so tests can pin it)."""

    store: Store
    clock: Callable[[], datetime] = utc_now

    def now(self) -> datetime:
        return self.clock()


Handler = Callable[[Any, HandlerContext], Awaitable[Decision]]
"""``async def create_session(cmd: CreateSession, ctx: HandlerContext) -> Decision``.
A refusal is returned as ``Rejected`` (or raised as a ``DomainError``, which becomes one);
any other exception means "try again later"."""

BatchHandler = Callable[[list[Any], HandlerContext], Awaitable[list[Decision | Exception]]]
"""``async def create_sessions(cmds: list[CreateSession], ctx) -> list[Decision | Exception]``:
one answer per command, in order (the same command may appear twice). An exception in the
list means "try that command again later"; one raised means "decide the run one by one"."""


class Counts(Protocol):
    handled: int
    skipped: int
    invalid: int
    outcomes_written: int
    outcomes_found: int


@dataclass
class Dispatcher:
    durable: str
    handlers: Mapping[type[Command], Handler]
    batch_handlers: Mapping[type[Command], BatchHandler]
    ctx: HandlerContext
    outcomes: OutcomeLog
    parking: Parking
    stats: Counts
    _held: list[Msg] = field(default_factory=list, init=False)

    async def decide_run(self, run: list[Msg]) -> list[Msg]:
        """``process_run``, returning the commands held back because the log was out of reach
        (``events.bus.is_unavailable``): they were neither answered nor counted as failed,
        and their runner tries them again (an election is not a poison command)."""
        self._held = []
        await self.process_run(run)
        held, self._held = self._held, []
        return held

    async def process_run(self, run: list[Msg]) -> None:
        """Decide a run (or one command); every command ends acked, or failed (retried or
        parked)."""
        parsed: list[tuple[Msg, Command]] = []
        for msg in run:
            if self.parking.is_exhausted(msg):
                await self._park_exhausted(msg)
                continue
            try:
                parsed.append((msg, parse_command(msg.subject, msg.data)))
            except (UnknownCommandError, ValidationError) as exc:
                await self._guarded(msg, self._reject_invalid(msg, exc))
        try:
            decided = await self.outcomes.decided([cmd.command_id for _, cmd in parsed])
        except Exception as exc:
            for msg, _ in parsed:
                await self._failed(msg, exc)
            return
        todo = []
        for msg, cmd in parsed:
            if cmd.command_id in decided:
                self.stats.skipped += 1
                await self._ack(msg)
            else:
                todo.append((msg, cmd))
        if not todo:
            return
        try:
            decisions = await self._decide([cmd for _, cmd in todo])
        except Exception as exc:
            if len(todo) == 1 and isinstance(exc, DomainError):
                await self._answer(todo, [exc])  # a refusal, not a failure
                return
            if len(todo) == 1:
                await self._failed(todo[0][0], exc)
                return
            log.warning("%s: a run of %d failed (%r); deciding them one by one",
                        self.durable, len(todo), exc)  # fmt: skip
            for msg, _ in todo:
                await self.process_run([msg])
            return
        await self._answer(todo, decisions)

    async def _decide(self, cmds: list[Command]) -> list[Decision | Exception]:
        """One answer per command, from its batch handler or (one command) its handler."""
        kind = type(cmds[0])
        batch = self.batch_handlers.get(kind)
        if batch is not None:
            decisions = await batch(cmds, self.ctx)
            if len(decisions) != len(cmds):
                raise RuntimeError(f"{len(decisions)} answers for {len(cmds)} commands")
            return decisions
        (cmd,) = cmds
        handler = self.handlers.get(kind)
        if handler is None:
            return [Rejected(Code.UNSUPPORTED, f"{self.durable} cannot {cmd.command_name()}")]
        return [await handler(cmd, self.ctx)]

    async def _answer(
        self, todo: list[tuple[Msg, Command]], decisions: list[Decision | Exception]
    ) -> None:
        """Store the outcomes together, then ack each command whose outcome is stored."""
        answered: list[tuple[Msg, Outcome]] = []
        now = self.ctx.now()
        for (msg, cmd), decision in zip(todo, decisions, strict=True):
            if isinstance(decision, DomainError):
                # A rule said no: retrying would say no again, so it is an outcome, not a
                # failure. Handlers may still return their own, more specific Rejected.
                decision = Rejected(Code.REFUSED, str(decision))
            if isinstance(decision, Exception):
                await self._failed(msg, decision)
                continue
            self.stats.handled += 1
            answered.append((msg, Outcome.of(cmd.command_id, decision, now)))
        try:
            stored = await self.outcomes.store([outcome for _, outcome in answered])
        except Exception as exc:  # not one of them is known to be stored
            stored = [exc] * len(answered)
        for (msg, outcome), result in zip(answered, stored, strict=True):
            if isinstance(result, Exception):
                await self._failed(msg, result)
                continue
            self._count(outcome, written=result)
            await self._ack(msg)

    async def _reject_invalid(self, msg: Msg, exc: UnknownCommandError | ValidationError) -> None:
        """Retrying cannot fix a malformed command: say why once, and ack."""
        self.stats.invalid += 1
        command_id = command_id_of(msg.data, msg.headers)
        if command_id not in await self.outcomes.decided([command_id]):
            await self.write(
                Outcome.rejected(command_id, Code.INVALID, explain(exc), self.ctx.now())
            )
        await msg.ack()

    @staticmethod
    async def _ack(msg: Msg) -> None:
        # A lost ack means a redelivery, which finds the stored outcome and is skipped.
        with contextlib.suppress(nats.errors.Error):
            await msg.ack()

    async def _guarded(self, msg: Msg, work: Awaitable[None]) -> None:
        try:
            await work
        except Exception as exc:
            await self._failed(msg, exc)

    async def _park_exhausted(self, msg: Msg) -> None:
        try:
            await self.parking.exhausted(msg)
        except Exception as exc:
            if is_unavailable(exc):
                self._held.append(msg)
                return
            # Unacked: delivered again after the ack wait, and parked then.
            log.exception("%s: could not park %s after its last delivery", self.durable,
                          msg.subject)  # fmt: skip

    async def _failed(self, msg: Msg, exc: Exception) -> None:
        if is_unavailable(exc):
            log.warning("%s: %s held back, the log is out of reach (%r)", self.durable,
                        msg.subject, exc)  # fmt: skip
            self._held.append(msg)
            return
        await self.parking.failed(msg, exc)

    async def write(self, outcome: Outcome) -> None:
        """Store the one outcome: expected sequence 0, so a second writer is refused."""
        (stored,) = await self.outcomes.store([outcome])
        if isinstance(stored, Exception):
            raise stored
        self._count(outcome, written=stored)

    def _count(self, outcome: Outcome, *, written: bool) -> None:
        if written:
            self.stats.outcomes_written += 1
        else:
            self.stats.outcomes_found += 1
            log.info("outcome of %s was already written; keeping that one", outcome.command_id)
