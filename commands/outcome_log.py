"""Outcomes in bulk on ``JY_OUTCOMES`` (``out.<command id>``): which of many commands already
have one (one batched direct get per 1,024), and storing many at once, pipelined, each
guarded with expected sequence 0 so that a command never gets two.

A runner deciding a run of commands uses it instead of one awaited round trip per outcome:
the outcomes of a run are written together and the commands acked once all are stored.

Stores are pipelined by hand (publish with a reply subject on the connection's ``Replies``
inbox, each answer routed to its outcome's future) rather than with nats-py's
``publish_async``: its futures never resolve when the server answers with an error
(``APIError.from_error`` raises inside the reply callback), and "an outcome is already stored"
is an error answer this module must read.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Sequence

from nats.aio.msg import Msg

from commands.outcome import Outcome
from events.bus import Bus
from events.direct import DirectReader
from events.store import EXPECTED_HEADER, WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_IN_BATCH
from events.writes import UnavailableError
from schemas.subjects import OUTCOMES_STREAM, outcome_subject


class OutcomeStoreError(RuntimeError):
    """The server refused an outcome for a reason other than "one is already stored"."""


class OutcomeLog:
    def __init__(self, bus: Bus, *, timeout: float) -> None:
        self._bus = bus
        self._timeout = timeout
        self._reader = DirectReader(bus.replies, OUTCOMES_STREAM, timeout=timeout)

    async def decided(self, command_ids: Sequence[str]) -> set[str]:
        """The commands among ``command_ids`` whose outcome is stored."""
        found = await self._reader.last_of([outcome_subject(c) for c in command_ids])
        return {subject.split(".", 1)[1] for subject in found}

    async def store(self, outcomes: Sequence[Outcome]) -> list[bool | Exception]:
        """Store every outcome, pipelined. Per outcome: True (stored), False (one was already
        stored: the guard kept it, and it is the answer), or what went wrong (not stored, or
        not known to be: the command must not be acked)."""
        if not outcomes:
            return []
        loop = asyncio.get_running_loop()
        replies = self._bus.replies
        futures: list[asyncio.Future[bool]] = []
        routes: list[str] = []
        try:
            for outcome in outcomes:
                future: asyncio.Future[bool] = loop.create_future()
                futures.append(future)
                routes.append(reply := await replies.route(functools.partial(_answer, future)))
                await self._bus.nc.publish(
                    outcome_subject(outcome.command_id),
                    outcome.model_dump_json().encode(),
                    reply=reply,
                    headers={EXPECTED_HEADER: "0", "Nats-Expected-Stream": OUTCOMES_STREAM},
                )
            await asyncio.wait(futures, timeout=self._timeout)
        finally:
            for reply in routes:
                replies.drop(reply)
        results: list[bool | Exception] = []
        for future in futures:
            if not future.done():
                future.cancel()
                results.append(TimeoutError(f"no answer within {self._timeout}s"))
            elif future.exception() is not None:
                error = future.exception()
                results.append(error if isinstance(error, Exception) else RuntimeError(error))
            else:
                results.append(future.result())
        return results


def _answer(future: asyncio.Future[bool], msg: Msg) -> None:
    """What the server answered to one stored outcome (routed here by ``Replies``)."""
    if future.done():
        return
    status = (msg.headers or {}).get("Status")
    if status is not None:  # 503: no stream (leader) listens on the subject
        future.set_exception(UnavailableError(f"no stream stored the outcome ({status})"))
        return
    try:
        answer = json.loads(msg.data)
    except ValueError as exc:
        future.set_exception(OutcomeStoreError(f"unreadable answer: {exc}"))
        return
    error = answer.get("error")
    if error is None:
        future.set_result(True)
    elif error.get("err_code") in (WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_IN_BATCH):
        # Another runner's outcome is there (a clustered stream says so without the sequence).
        future.set_result(False)
    else:
        future.set_exception(OutcomeStoreError(f"the server refused the outcome: {error}"))
