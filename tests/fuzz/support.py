"""What the fuzz tests share: a real gateway for the module, and the streams' last sequences
(a refused request must move neither)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from events.bus import Bus
from schemas.subjects import COMMANDS_STREAM, EVENTS_STREAM
from tests.integration.gateway_support import Gateway, running_gateway


@contextlib.asynccontextmanager
async def fuzzed_gateway(bus: Bus, data_dir: Path) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, data_dir, command_timeout_s=0.3) as gateway:
        yield gateway


async def last_seqs(bus: Bus) -> tuple[int, int]:
    """(JY_COMMANDS, JY_EVENTS) last sequences."""
    commands = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq
    events = (await bus.js.stream_info(EVENTS_STREAM)).state.last_seq
    return commands, events
