"""The sender's side: publish commands to ``cmd.<aggregate>.<verb>`` (``JY_COMMANDS``) and read
or wait for their outcome on ``out.<command id>`` (``JY_OUTCOMES``)."""

from __future__ import annotations

import asyncio
import contextlib

import nats.errors
from nats.aio.msg import Msg
from nats.js.api import PubAck
from nats.js.errors import NotFoundError

from commands.messages import COMMAND_NAME_HEADER, Command
from commands.outcome import Outcome
from events.bus import Bus, is_leaderless
from events.store import LEADERLESS_PAUSE_S, LEADERLESS_WAIT_S
from events.writes import OutcomeUnknownError, UnavailableError
from schemas.subjects import COMMANDS_STREAM, OUTCOMES_STREAM, outcome_subject

# A waiter also reads again when nothing woke it, soon at first and then every RECHECK_S:
# the server routes a message to core subscribers before its stream stores it, so an outcome
# routed just before our SUB and stored just after our first read neither wakes us nor was
# found; and core delivery is at most once (a reconnect loses wake-ups).
FIRST_RECHECK_S = 0.02
RECHECK_S = 1.0
SEND_TIMEOUT_S = 3.0
"""How long a send waits for the log's ack. A leader cut off from its quorum neither stores
nor refuses: after this the sender hears ``TimeoutError`` (the gateway answers
``unavailable``), and sending the same command again is safe (its id is its dedup key)."""


class SendUnknownError(OutcomeUnknownError):
    """The log did not answer a send in time: the command may or may not be stored. Sending
    it again with the same id is safe (the id is its deduplication key), and asking for its
    outcome later tells."""

    def __init__(self, command_id: str, timeout: float) -> None:
        self.command_id = command_id
        super().__init__(
            f"the log did not answer within {timeout:g} s: command {command_id} may still be "
            "stored; send it again with the same id, or ask for its outcome later"
        )


class CommandBus:
    def __init__(
        self,
        bus: Bus,
        *,
        recheck_s: float = RECHECK_S,
        leaderless_wait: float = LEADERLESS_WAIT_S,
        send_timeout: float = SEND_TIMEOUT_S,
    ) -> None:
        self._bus = bus
        self._send_timeout = min(send_timeout, bus.settings.request_timeout_s)
        self._recheck_s = recheck_s
        self._leaderless_wait = leaderless_wait

    async def send(self, cmd: Command) -> PubAck:
        """Store the command. Sent again with the same id inside the duplicate window, it is
        not stored twice (``PubAck.duplicate`` is True); after the window the runner finds the
        existing outcome and skips it.

        While ``JY_COMMANDS`` has no leader (an election) it is sent again for up to
        ``leaderless_wait`` seconds; a log still leaderless then (no quorum) raises
        ``UnavailableError``: nothing was stored."""
        headers = {"Nats-Msg-Id": cmd.command_id, COMMAND_NAME_HEADER: cmd.command_name()}
        data = cmd.model_dump_json().encode()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._leaderless_wait
        while True:
            try:
                return await self._bus.js.publish(
                    cmd.subject(), data, stream=COMMANDS_STREAM, headers=headers,
                    timeout=self._send_timeout,
                )  # fmt: skip
            except (TimeoutError, nats.errors.TimeoutError) as exc:
                # A leader cut off from its quorum neither stores nor refuses: the command may
                # still be stored later (when the cluster heals), or never.
                raise SendUnknownError(cmd.command_id, self._send_timeout) from exc
            except Exception as exc:
                if not is_leaderless(exc):
                    raise
                if loop.time() > deadline:
                    raise UnavailableError(
                        f"the command log has no leader ({type(exc).__name__}): "
                        f"{cmd.command_name()} {cmd.command_id} was not stored"
                    ) from exc
                await asyncio.sleep(LEADERLESS_PAUSE_S)

    async def outcome(self, command_id: str) -> Outcome | None:
        """The stored outcome, or None if the command has not been decided (yet)."""
        try:
            stored = await self._bus.js.get_last_msg(
                OUTCOMES_STREAM, outcome_subject(command_id), direct=True
            )
        except NotFoundError:
            return None
        return Outcome.model_validate_json(stored.data or b"")

    async def wait_outcome(self, command_id: str, timeout: float) -> Outcome | None:
        """The outcome once it is stored, or None after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        woken = asyncio.Event()

        async def wake(_: Msg) -> None:
            # A core subscriber also sees messages JetStream refused (a second outcome
            # rejected by its guard), so the body is never trusted: only the stored one is.
            woken.set()

        # Subscribe before the first read: SUB and the read request leave on one connection
        # in order, so an outcome stored after the read was served still wakes us.
        sub = await self._bus.nc.subscribe(outcome_subject(command_id), cb=wake)
        recheck = FIRST_RECHECK_S
        try:
            while True:
                woken.clear()
                found = await self.outcome(command_id)
                if found is not None:
                    return found
                left = deadline - loop.time()
                if left <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), min(left, recheck))
                recheck = min(recheck * 2, self._recheck_s)
        finally:
            await sub.unsubscribe()

    async def execute(self, cmd: Command, timeout: float) -> Outcome | None:
        """Send and wait: the outcome, or None (pending) if not decided within ``timeout``."""
        await self.send(cmd)
        return await self.wait_outcome(cmd.command_id, timeout)
