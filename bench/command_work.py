"""What every variant of ``bench.faststream_commands`` does with a command on
``cmd.session.create`` (``JY_COMMANDS``): the runner's consumer settings, and the runner's
minimum work (parse, store the outcome on ``out.<command id>`` in ``JY_OUTCOMES`` guarded with
expected sequence 0, ack); and the commands it sends.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from nats.aio.msg import Msg
from nats.js import api

from commands.bus import CommandBus
from commands.dispatch import utc_now
from commands.messages import CreateSession, parse_command
from commands.outcome import Accepted, Outcome
from commands.outcome_log import OutcomeLog
from commands.parking import Retry
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec

SUBJECT = CreateSession.subject()


def consumer_config(durable: str) -> api.ConsumerConfig:
    """The runner's consumer (``CommandRunner.start``)."""
    retry = Retry()
    return api.ConsumerConfig(
        durable_name=durable,
        filter_subject=SUBJECT,
        ack_policy=api.AckPolicy.EXPLICIT,
        deliver_policy=api.DeliverPolicy.ALL,
        max_deliver=-1,
        backoff=list(retry.backoff),
    )


@dataclass
class Work:
    """Parse, store the outcomes (pipelined, guarded), then ack: the same for every variant."""

    outcomes: OutcomeLog
    done: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    marks: list[tuple[float, int]] = field(default_factory=list)

    async def handle(self, msgs: list[Msg]) -> None:
        cmds = [parse_command(m.subject, m.data) for m in msgs]
        now = utc_now()
        answers = [Outcome.of(c.command_id, Accepted(), now) for c in cmds]
        stored = await self.outcomes.store(answers)
        for msg, result in zip(msgs, stored, strict=True):
            if isinstance(result, Exception):
                raise result  # never in this bench: every outcome is new
            await msg.ack()
        self.done += len(msgs)
        self.marks.append((time.perf_counter(), self.done))
        self.changed.set()

    def steady_rate(self, count: int) -> float:
        """Commands/s between 10 % and 90 % of ``count`` answered: no start-up, and no last
        partial batch (which FastStream's batch subscriber holds until its timeout)."""
        (t0, d0), (t1, d1) = (next(m for m in self.marks if m[1] >= f * count) for f in (0.1, 0.9))
        return (d1 - d0) / (t1 - t0)

    async def reach(self, count: int, timeout: float = 300.0) -> None:
        async with asyncio.timeout(timeout):
            while self.done < count:
                self.changed.clear()
                await self.changed.wait()


def command(n: int) -> CreateSession:
    spec = SessionSpec(
        image="cr.example.com/research/pytorch:2.5-cuda12",
        name=f"bench-{n}",
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu="4", memory=16 << 30, gpu="1")),),
        env={"EXPERIMENT": "faststream", "SEED": str(n)},
    )
    return CreateSession(actor=Actor.service("bench"), tenant=SYSTEM_TENANT, spec=spec)


async def send_all(commands: CommandBus, count: int, window: int = 512) -> None:
    for start in range(0, count, window):
        await asyncio.gather(
            *(commands.send(command(n)) for n in range(start, min(count, start + window)))
        )
