"""Poison commands: a command that keeps failing is tried again with back-off, then parked on
``parked.<command id>`` (``JY_PARKED``) with the reason, and its sender gets a ``parked``
outcome. The runner counts deliveries itself (its consumer's ``max_deliver`` is unlimited):
a command delivered once more than ``Retry.max_deliver`` had every earlier delivery end without
an answer (its runner died or hung), and is parked before any handler sees it again. The
server's own limit would instead end such a command with an advisory that only a runner
listening at that instant hears: with every replica down, the command would stay in the work
queue, never delivered again and never answered.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import nats.errors
from nats.aio.msg import Msg

from commands.bus import CommandBus
from commands.messages import COMMAND_NAME_HEADER, command_id_of
from commands.outcome import Code, Outcome
from events.bus import Bus
from events.tail import deliveries
from schemas.subjects import PARKED_STREAM, parked_subject

log = logging.getLogger(__name__)

PARK_REASON_HEADER = "Jy-Park-Reason"
PARK_ERROR_HEADER = "Jy-Park-Error"
PARK_DELIVERIES_HEADER = "Jy-Deliveries"
PARK_SUBJECT_HEADER = "Jy-Command-Subject"


@dataclass(frozen=True, slots=True)
class Retry:
    """How often a failing command is tried, and how long to wait between tries (the server
    redelivers an unanswered one after the delay for its delivery count, the last repeated)."""

    max_deliver: int = 5
    backoff: tuple[float, ...] = (5.0, 15.0, 30.0, 60.0)

    def __post_init__(self) -> None:
        if not self.backoff or self.max_deliver < 1 or min(self.backoff) <= 0:
            raise ValueError("give at least one backoff delay above 0 and max_deliver >= 1")

    def delay(self, deliveries: int) -> float:
        return self.backoff[min(deliveries, len(self.backoff)) - 1]


class Counts(Protocol):
    retried: int
    parked: int


@dataclass
class Parking:
    bus: Bus
    durable: str
    retry: Retry
    counts: Counts
    answer: Callable[[Outcome], Awaitable[None]]
    """Stores an outcome (at most once per command)."""
    now: Callable[[], datetime]

    async def failed(self, msg: Msg, exc: Exception) -> None:
        """A try failed: redeliver it later, or park it after its last delivery."""
        deliveries = msg.metadata.num_delivered
        reason = f"{type(exc).__name__}: {exc}"
        if deliveries < self.retry.max_deliver:
            self.counts.retried += 1
            log.warning("%s: attempt %d failed (%s); retrying", msg.subject, deliveries, reason)
            with contextlib.suppress(nats.errors.Error):
                await msg.nak(delay=self.retry.delay(deliveries))
            return
        try:
            error = type(exc).__name__
            await self.park(msg.subject, msg.data, msg.headers, deliveries, error, reason)
        except Exception:
            # Unacked: the server delivers it again after the ack wait, past the last
            # delivery, and whichever runner gets it parks it then (``exhausted``).
            log.exception("%s: could not park after %d deliveries", msg.subject, deliveries)
            return
        await msg.term()

    async def park(
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
        self.counts.parked += 1
        log.error("parked command %s (%s) after %d deliveries: %s", command_id, subject,
                  deliveries, reason)  # fmt: skip
        message = f"the command failed {deliveries} times and was parked: {reason}"
        await self.answer(Outcome.rejected(command_id, Code.PARKED, message, self.now()))

    def is_exhausted(self, msg: Msg) -> bool:
        return deliveries(msg.reply) > self.retry.max_deliver

    async def exhausted(self, msg: Msg) -> None:
        """A delivery past the last: none of the earlier ones was answered (their runner died
        or hung), so the command is parked, unless an outcome was stored after all."""
        deliveries = msg.metadata.num_delivered - 1
        if await CommandBus(self.bus).outcome(command_id_of(msg.data, msg.headers)) is None:
            reason = f"no answer after {deliveries} deliveries (the runner died or hung)"
            await self.park(msg.subject, msg.data, msg.headers, deliveries, "NoAnswer", reason)
        await msg.term()
