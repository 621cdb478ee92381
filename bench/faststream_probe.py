"""Checks on a server what FastStream's NATS pull subscriber does with a failing command:
reads ``cmd.session.create`` (``JY_COMMANDS``) through FastStream, writes nothing else.

  1. ``AckPolicy.MANUAL``: the handler naks with a delay and reads the delivery count from the
     nats-py message underneath (``NatsMessage.raw_message.metadata.num_delivered``), the two
     things the runner's back-off and parking need.
  2. The default ack policy (``REJECT_ON_ERROR``): a handler that raises once has its command
     terminated: never redelivered, no outcome, not parked.

Used by ``bench.faststream_commands --probe``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import faststream
from faststream.nats import JStream, NatsBroker, PullSub
from faststream.nats.message import NatsMessage
from nats.js import api

from bench.command_work import SUBJECT, command
from commands.bus import CommandBus
from events.bus import Bus
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM

NAK_DELAY_S = 0.5
ACK_WAIT_S = 1.0


def _subscribe(
    broker: NatsBroker, durable: str, handler: Callable[..., Awaitable[None]], **policy: Any
) -> None:
    # No back-off on this consumer: with one, nats-server 2.15 held the third delivery of a
    # message nak'ed with a 0.5 s delay for ~10 s, which is the server's doing, not FastStream's.
    config = api.ConsumerConfig(
        durable_name=durable,
        filter_subject=SUBJECT,
        ack_policy=api.AckPolicy.EXPLICIT,
        max_deliver=5,
        ack_wait=ACK_WAIT_S,
    )
    subscriber = broker.subscriber(
        SUBJECT, stream=JStream(COMMANDS_STREAM, declare=False), durable=durable,
        config=config, pull_sub=PullSub(16, 0.2), **policy,
    )  # fmt: skip
    subscriber(handler)


async def nak_with_delay(bus: Bus, url: str) -> str:
    durable = f"probe-nak-{new_id()[:8]}"
    broker = NatsBroker(url, logger=None)
    seen: list[tuple[int, float]] = []

    async def fail_twice(message: Annotated[NatsMessage, faststream.Context("message")]) -> None:
        deliveries = message.raw_message.metadata.num_delivered
        seen.append((deliveries, time.perf_counter()))
        if deliveries < 3:
            await message.nack(delay=NAK_DELAY_S)
        else:
            await message.ack()

    _subscribe(broker, durable, fail_twice, ack_policy=faststream.AckPolicy.MANUAL)
    await broker.start()
    try:
        await CommandBus(bus).send(command(0))
        async with asyncio.timeout(10):
            while len(seen) < 3:  # noqa: ASYNC110 (polls what the handler records)
                await asyncio.sleep(0.02)
    finally:
        await broker.stop()
        await bus.js.delete_consumer(COMMANDS_STREAM, durable)
    counts = [d for d, _ in seen]
    gaps = [f"{b - a:.2f}" for (_, a), (_, b) in itertools.pairwise(seen)]
    return (
        f"MANUAL: nack(delay={NAK_DELAY_S}) redelivered after {', '.join(gaps)} s; "
        f"num_delivered seen {counts} (from raw_message.metadata, not a FastStream field)"
    )


async def default_policy_drops(bus: Bus, url: str) -> str:
    durable = f"probe-default-{new_id()[:8]}"
    broker = NatsBroker(url, logger=None)
    calls = 0

    async def fail_once(message: Annotated[NatsMessage, faststream.Context("message")]) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("a transient failure (the store timed out)")

    _subscribe(broker, durable, fail_once)  # the ack policy left at FastStream's default
    await broker.start()
    cmd = command(0)
    try:
        await CommandBus(bus).send(cmd)
        # Three ack waits: an unacked or nak'ed command would have come back by then; a
        # terminated one never does.
        await asyncio.sleep(3 * ACK_WAIT_S)
        info = await bus.js.consumer_info(COMMANDS_STREAM, durable)
    finally:
        await broker.stop()
        await bus.js.delete_consumer(COMMANDS_STREAM, durable)
    outcome = await CommandBus(bus).outcome(cmd.command_id)
    return (
        f"default ack policy: handler called {calls} time(s); consumer pending "
        f"{info.num_pending}, unacked {info.num_ack_pending}, redelivered "
        f"{info.num_redelivered}; outcome {outcome}: the command was terminated (dropped)"
    )


async def probe(bus: Bus, url: str) -> list[str]:
    return [await nak_with_delay(bus, url), await default_policy_drops(bus, url)]
