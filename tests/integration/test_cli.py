"""The ``jetyard`` command line against a real server: audit replay of the log, one JSON
object a line with its stream sequence inside (what ``jq`` reads)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from events.bus import Bus
from events.store import EventStore
from events.writes import Write
from tests.support import envelope, ref


async def _jetyard(bus: Bus, *args: str, **extra_env: str) -> tuple[int, str, str]:
    env = {**os.environ, "JETYARD_NATS_URL": bus.settings.url, **extra_env}
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "jetyard"),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_log_replays_one_aggregate_in_order(bus: Bus) -> None:
    a = ref()
    await EventStore(bus).append(Write.create(a, *(envelope(a, v) for v in (1, 2, 3))))
    code, out, _ = await _jetyard(bus, "log", "--aggregate", f"{a.type.value}/{a.id}")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert [event["aggregate_version"] for event in events] == [1, 2, 3]
    assert [event["seq"] for event in events] == sorted(event["seq"] for event in events)


async def test_log_replays_the_whole_log_from_a_sequence(bus: Bus) -> None:
    a = ref()
    committed = await EventStore(bus).append(Write.create(a, envelope(a, 1), envelope(a, 2)))
    code, out, _ = await _jetyard(bus, "log", "--from-seq", str(committed.seqs[0]))
    assert code == 0
    seqs = [json.loads(line)["seq"] for line in out.splitlines()]
    assert seqs[:2] == list(committed.seqs)
    assert seqs == sorted(seqs)


async def test_an_unreachable_server_is_a_clear_error(bus: Bus) -> None:
    env_bus = Bus(
        nc=bus.nc, js=bus.js, settings=bus.settings.model_copy(update={"url": "nats://127.0.0.1:1"})
    )
    code, _, err = await _jetyard(env_bus, "log", JETYARD_NATS_CONNECT_TIMEOUT_S="1")
    assert code == 2
    assert "cannot connect to NATS at nats://127.0.0.1:1" in err
