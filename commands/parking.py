"""Poison commands: a command that keeps failing is tried again with back-off, then parked on
``parked.<command id>`` (``JY_PARKED``) with the reason, and its sender gets a ``parked``
outcome. Also reads the consumer's max-deliveries advisory
(``$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.JY_COMMANDS.<durable>``) for commands whose
runner died or hung on their last delivery, and deletes those from ``JY_COMMANDS`` once parked.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import nats.errors
from nats.aio.msg import Msg
from nats.js.errors import APIError, NotFoundError

from commands.bus import CommandBus
from commands.messages import COMMAND_NAME_HEADER, command_id_of
from commands.outcome import Code, Outcome
from events.bus import Bus
from schemas.subjects import COMMANDS_STREAM, PARKED_STREAM, parked_subject

log = logging.getLogger(__name__)

PARK_REASON_HEADER = "Jy-Park-Reason"
PARK_ERROR_HEADER = "Jy-Park-Error"
PARK_DELIVERIES_HEADER = "Jy-Deliveries"
PARK_SUBJECT_HEADER = "Jy-Command-Subject"
MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"


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

    def advisory_subject(self) -> str:
        return f"{MAX_DELIVERIES_ADVISORY}.{COMMANDS_STREAM}.{self.durable}"

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
            # Unacked at its last delivery: the server's max-deliveries advisory brings it back
            # to on_exhausted (here or in a replica), which parks it then.
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

    async def on_exhausted(self, advisory: Msg) -> None:
        """A command used its last delivery without an answer (its runner died or hung)."""
        try:
            body = json.loads(advisory.data)
            seq, deliveries = int(body["stream_seq"]), int(body["deliveries"])
            try:
                stored = await self.bus.js.get_msg(COMMANDS_STREAM, seq)
            except NotFoundError:
                return  # acked after all, or a replica already dealt with it
            data, headers = stored.data or b"", stored.headers
            if await CommandBus(self.bus).outcome(command_id_of(data, headers)) is None:
                reason = f"no answer after {deliveries} deliveries (the runner died or hung)"
                subject = stored.subject or ""
                await self.park(subject, data, headers, deliveries, "NoAnswer", reason)
            # A work queue keeps an exhausted message forever; it is parked now, so drop it.
            with contextlib.suppress(NotFoundError, APIError):
                await self.bus.js.delete_msg(COMMANDS_STREAM, seq)
        except Exception:
            log.exception("%s: could not park an exhausted command: %r", self.durable, advisory)
