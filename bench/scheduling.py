"""Sessions requested → scheduled per second, with 100 simulated agents, next to the store's
ceilings measured in the same run.

Layout: a nats-server child (file storage, R1); the scheduler in its own process
(``jetyard serve scheduler``); 100 simulated node agents in a second child process; this
process sends ``CreateSession`` commands (a window of them in flight) and watches
``SessionScheduled`` on ``ev.session.*`` through a JetStream consumer (``Tail``). Latency is
from the command's send to the observed ``SessionScheduled``; projections do not run.

Run:  python -m bench.scheduling [--sessions 2000] [--agents 100] [--window 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.foundation import awaited_store, group_commit
from commands.bus import CommandBus
from commands.messages import CreateSession
from events.bus import connect, ensure_streams
from events.store import EventStore
from events.tail import Tail
from jetyard.runtime.natsserver import NatsServer
from schemas.ids import session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.settings import NatsSettings
from schemas.subjects import events_of
from tests.tenancy_support import make_tenancy

AGENTS_CHILD = """
import asyncio, sys
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings
from events.bus import connect
from schemas.settings import NatsSettings
from schemas.ids import node_id_for_host

async def main(count):
    bus = await connect(NatsSettings(), name="bench-agents")
    stop = asyncio.Event()
    tasks = []
    for i in range(count):
        settings = AgentSettings(hostname=f"sim-{i:04d}", backend="simulated", cpu=64,
                                 memory_bytes=256 << 30)
        backend = SimulatedBackend(node_id_for_host(settings.hostname), settings.simulated_images)
        tasks.append(asyncio.create_task(NodeAgent(bus, settings, backend).run(stop)))
    print("agents up", flush=True)
    await asyncio.gather(*tasks)

asyncio.run(main(int(sys.argv[1])))
"""

IMAGE = "jetyard-busybox:latest"


async def _wait_nodes(bus_settings: NatsSettings, count: int, timeout: float = 120) -> None:
    bus = await connect(bus_settings, name="bench-wait")
    tail = Tail(bus, subjects=[events_of("node")], names=frozenset({"NodeRegistered"}))
    seen = 0
    deadline = time.monotonic() + timeout
    while seen < count and time.monotonic() < deadline:
        seen += len(await tail.fetch_raw(1.0))
    await tail.close()
    await bus.close()
    if seen < count:
        raise TimeoutError(f"only {seen} of {count} nodes registered")


async def measure(settings: NatsSettings, sessions: int, window: int) -> dict[str, float]:
    bus = await connect(settings, name="bench-client")
    commands = CommandBus(bus)
    actor = Actor.service("bench")
    spec = SessionSpec(
        image=IMAGE, kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.1", memory=64 << 20)),)
    )
    store = EventStore(bus)
    # Sessions need an owner: one keypair whose policy limits nothing, so admission (which
    # now runs in every pass) admits each session at once.
    owner = (await make_tenancy(store)).owner
    start_seq = await store.stream_last_seq() + 1
    sent: dict[str, float] = {}
    seen: dict[str, float] = {}

    async def watch() -> None:
        tail = Tail(
            bus,
            from_seq=start_seq,
            subjects=[events_of("session")],
            names=frozenset({"SessionScheduled"}),
        )
        while len(seen) < sessions:
            for message in await tail.fetch_raw(1.0):
                session_id = message.subject.rsplit(".", 1)[1]
                seen.setdefault(session_id, time.perf_counter())
        await tail.close()

    watcher = asyncio.create_task(watch())
    begin = time.perf_counter()
    pending: set[asyncio.Task[object]] = set()
    for _ in range(sessions):
        command = CreateSession(actor=actor, tenant=SYSTEM_TENANT, spec=spec, owner=owner)
        sent[session_id_for(command.command_id)] = time.perf_counter()
        pending.add(asyncio.create_task(commands.send(command)))
        if len(pending) >= window:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        # A bounded number of sessions not yet scheduled: an open loop would only measure
        # how fast the queue grows.
        while len(sent) - len(seen) > window:  # noqa: ASYNC110 (polls a shared counter)
            await asyncio.sleep(0.001)
    await asyncio.gather(*pending)
    await asyncio.wait_for(watcher, 300)
    elapsed = time.perf_counter() - begin
    latencies = sorted((seen[s] - t) * 1000 for s, t in sent.items())
    await bus.close()
    return {
        "sessions requested → scheduled per second": sessions / elapsed,
        "latency p50 (ms)": statistics.median(latencies),
        "latency p99 (ms)": latencies[int(len(latencies) * 0.99) - 1],
    }


async def ceilings(settings: NatsSettings, seconds: float) -> dict[str, float]:
    bus = await connect(settings, name="bench-ceilings")
    store = EventStore(bus)
    out = {
        "ceiling: awaited guarded append/s": await awaited_store(store, seconds),
        "ceiling: group commit batch 100 (msgs/s)": (await group_commit(store, seconds, 100))[0],
    }
    await bus.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--window", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(data_dir=Path(tmp) / "nats", token="bench").start()
        settings = NatsSettings(url=server.url, token="bench")
        env = {**os.environ, "JETYARD_NATS_URL": server.url, "JETYARD_NATS_TOKEN": "bench"}
        children: list[subprocess.Popen[bytes]] = []
        try:

            async def declare() -> None:
                bus = await connect(settings, name="bench")
                await ensure_streams(bus)
                await bus.close()

            asyncio.run(declare())
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", AGENTS_CHILD, str(args.agents)],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=open(Path(tmp) / "agents.log", "wb"),  # noqa: SIM115
                )
            )
            children.append(
                subprocess.Popen(
                    [sys.executable, "-m", "jetyard.cli", "serve", "scheduler"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=open(Path(tmp) / "scheduler.log", "wb"),  # noqa: SIM115
                )
            )
            asyncio.run(_wait_nodes(settings, args.agents))
            results = asyncio.run(measure(settings, args.sessions, args.window))
            for child in children:
                child.terminate()
            for child in children:
                child.wait(30)
            results.update(asyncio.run(ceilings(settings, 2.0)))
        finally:
            for child in children:
                if child.poll() is None:
                    child.kill()
            server.stop()
    print(
        f"# session path: {args.sessions} sessions, {args.agents} simulated agents (one process), "
        "scheduler in its own process, nats-server file storage R1 default sync, no projections"
    )
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value:>10,.1f}")


if __name__ == "__main__":
    main()
