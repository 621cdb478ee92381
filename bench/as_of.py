"""What ``asOf`` costs over a long history: the views as they were at a log position, built by
``projections.history.History`` (the gateway's), on a log of ``--events`` real session
envelopes (``bench.audit_log``: each session requested, then cancelled).

Phases, on one nats-server of its own (file storage, R1) and SQLite files in a temporary
directory:

  replay      the baseline: the live projector (``Projector.catch_up``) from the first event
              to the last, into a fresh database (what a rebuild costs, and what every asOf
              would cost without snapshots)
  cold        asOf at the log's end on a new History: projects everything, leaving a snapshot
              every ``--snapshot-every`` events on the way
  warm        asOf at ``--asks`` random positions of the whole log afterwards: each projects
              from the nearest snapshot below (at most ``--snapshot-every`` events); the
              slowest of them is the bound an auditor waits for, once the snapshots exist

It prints each phase's events and seconds, the warm answers' median and slowest, the
snapshots' count and disk use, and the process's peak RSS. The last line is
``as_of_warm_max_s: N``.

Run:  python -m bench.as_of                         (1,000,000 events, snapshots every 50,000)
      python -m bench.as_of --events 100000 --snapshot-every 10000   (a short form)
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import tempfile
import time
from pathlib import Path

from bench.audit_log import write_log
from events.bus import connect, ensure_streams
from jetyard.runtime.natsserver import NatsServer
from projections.db import create_engine
from projections.history import History
from projections.queries import count_sessions
from projections.runner import Projector
from schemas.settings import NatsSettings


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / (1 << 20)


async def measure(args: argparse.Namespace, tmp: Path) -> None:
    server = NatsServer(data_dir=tmp / "nats", token="bench").start()
    try:
        bus = await connect(NatsSettings(url=server.url, token="bench"), name="bench-as-of")
        await ensure_streams(bus)
        start = time.perf_counter()
        end = await write_log(bus, args.events)
        print(f"# write: {end:,} events in {time.perf_counter() - start:.1f} s", flush=True)

        engine = create_engine(f"sqlite:///{tmp / 'live.db'}")
        projector = Projector(engine, bus)
        start = time.perf_counter()
        await projector.catch_up(timeout=2.0)
        replay_s = time.perf_counter() - start
        await projector.close()
        sessions = await count_sessions(engine, status=None)
        await engine.dispose()
        print(f"# replay: {end:,} events in {replay_s:.1f} s ({sessions:,} sessions)", flush=True)

        history = History(
            bus, tmp / "history", snapshot_every=args.snapshot_every,
            keep_snapshots=args.keep_snapshots, keep_open=1,
        )  # fmt: skip
        start = time.perf_counter()
        cold_engine = await history.views_at(end)
        cold_s = time.perf_counter() - start
        assert await count_sessions(cold_engine, status=None) == sessions
        print(f"# cold: {end:,} events in {cold_s:.1f} s", flush=True)

        rng = random.Random(args.seed)
        warm: list[float] = []
        projected = history.projected
        for _ in range(args.asks):
            position = rng.randint(1, end)
            start = time.perf_counter()
            await history.views_at(position)
            warm.append(time.perf_counter() - start)
        per_ask = (history.projected - projected) / max(args.asks, 1)
        snapshots = history.snapshots
        size = disk_mib(tmp / "history" / "snapshots")
        await history.close()
        await bus.close()
    finally:
        server.stop()

    print(f"# asOf bench: {end:,} events, snapshots every {args.snapshot_every:,}")
    print(f"{'phase':<8} {'events':>10} {'s':>8} {'events/s':>10}")
    print(f"{'replay':<8} {end:>10,} {replay_s:>8.1f} {end / replay_s:>10,.0f}")
    print(f"{'cold':<8} {end:>10,} {cold_s:>8.1f} {end / cold_s:>10,.0f}")
    print(
        f"warm: {args.asks} asks at random positions, median {statistics.median(warm):.2f} s, "
        f"slowest {max(warm):.2f} s, {per_ask:,.0f} events projected per ask"
    )
    print(
        f"snapshots: {len(snapshots)} kept, {size:,.0f} MiB on disk; "
        f"peak RSS {peak_rss_mib():,.0f} MiB"
    )
    print(f"as_of_warm_max_s: {max(warm):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--snapshot-every", type=int, default=50_000)
    parser.add_argument("--keep-snapshots", type=int, default=40)
    parser.add_argument("--asks", type=int, default=10)
    parser.add_argument("--seed", type=int, default=29)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(measure(args, Path(tmp)))


if __name__ == "__main__":
    main()
