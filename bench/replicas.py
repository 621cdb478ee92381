"""Two scheduler replicas on one log at full size: 200 simulated agents, a burst of 2,000
sessions from four keypairs, with admission leases on and with both replicas forced active;
the whole log replayed by the independent checker. The scale form of
``tests/integration/test_scheduler_replicas.py`` (which runs 50 agents and 500 sessions).

Starts its own nats-server per run (file storage, R1), so the replayed log is the run's alone.
Prints each run's line (progress, timings, pass writes, conflicts, the replay's report) and
a JSON summary; exits 1 when a run double-allocated, left a session unscheduled or a job
unended.

Run:  python -m bench.replicas [--agents 200] [--sessions 2000] [--timeout 150]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from events.bus import connect, ensure_streams
from jetyard.runtime.natsserver import NatsServer
from schemas.settings import NatsSettings
from tests.integration.replica_burst import FULL, Size, burst


async def one_run(size: Size, leases: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="jy-replicas-") as tmp:
        server = NatsServer(data_dir=Path(tmp) / "nats").start()
        try:
            settings = NatsSettings(url=server.url, request_timeout_s=10.0)
            setup = await connect(settings, name="replicas-setup")
            await ensure_streams(setup)
            await setup.close()
            begin = time.perf_counter()
            progress, report, writes = await burst(settings, size, leases)
            return {
                "leases": leases,
                "seconds": round(time.perf_counter() - begin, 1),
                "done": progress.done,
                "violations": len(report.violations),
                "sessions_scheduled": report.scheduled,
                "pass_writes": writes,
            }
        finally:
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.replicas", description=__doc__)
    parser.add_argument("--agents", type=int, default=FULL.agents)
    parser.add_argument("--sessions", type=int, default=FULL.sessions)
    parser.add_argument("--timeout", type=float, default=FULL.timeout_s)
    args = parser.parse_args()
    size = Size(agents=args.agents, sessions=args.sessions, timeout_s=args.timeout)
    runs = [asyncio.run(one_run(size, leases)) for leases in (True, False)]
    print(json.dumps({"agents": size.agents, "sessions": size.sessions, "runs": runs}))
    ok = all(r["done"] and r["violations"] == 0 for r in runs)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
