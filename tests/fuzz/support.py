"""What the fuzz tests share: a real gateway for the module, and the streams' last sequences
(a refused request must move neither)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import nats.js.errors
from nats.js import api

from events.bus import Bus
from schemas.ids import new_id
from schemas.subjects import COMMANDS_STREAM, EVENTS_STREAM, AggregateType, commands_of
from tests.integration.gateway_support import Gateway, running_gateway


@contextlib.asynccontextmanager
async def fuzzed_gateway(bus: Bus, data_dir: Path) -> AsyncIterator[Gateway]:
    """A gateway (with its tenancy service, but no scheduler: accepted creates wait in the
    work queue); afterwards the creates it sent are taken off the queue, so no later test's
    consumer of ``cmd.session.*`` finds them."""
    try:
        async with running_gateway(bus, data_dir, command_timeout_s=0.3) as gateway:
            yield gateway
    finally:
        await take_waiting_commands(bus, commands_of(AggregateType.SESSION))


async def take_waiting_commands(bus: Bus, subject: str) -> int:
    """Ack (and so remove, on the work queue) every command waiting on ``subject``."""
    durable = f"fuzz-drain-{new_id()[:8]}"
    config = api.ConsumerConfig(
        durable_name=durable, filter_subject=subject, ack_policy=api.AckPolicy.EXPLICIT
    )
    try:
        await bus.js.add_consumer(COMMANDS_STREAM, config)
    except nats.js.errors.BadRequestError:
        return 0  # another consumer holds these subjects: it takes them
    taken = 0
    try:
        sub = await bus.js.pull_subscribe_bind(durable, stream=COMMANDS_STREAM)
        try:
            while True:
                try:
                    batch = await sub.fetch(256, timeout=0.5)
                except TimeoutError:
                    break
                for msg in batch:
                    await msg.ack()
                taken += len(batch)
        finally:
            await sub.unsubscribe()
    finally:
        await bus.js.delete_consumer(COMMANDS_STREAM, durable)
    return taken


async def last_seqs(bus: Bus) -> tuple[int, int]:
    """(JY_COMMANDS, JY_EVENTS) last sequences."""
    commands = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    events = (await bus.js.stream_info(EVENTS_STREAM)).state.last_seq
    return commands, events
