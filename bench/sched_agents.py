"""The agents of the scale benchmark: N simulated node agents in one process (the bench's
child). Each is a real ``NodeAgent`` on the simulated backend, with its own ledger tail (an
ephemeral consumer), heartbeat and reconcile loop: what N machines would do, minus the
containers. All share one NATS connection.

Run:  python -m bench.sched_agents COUNT [--gpus 8] [--cpus 256] [--memory-gib 2048]
Prints "agents up" once every agent's task runs; the bench then waits for the scheduler's
``NodeRegistered`` of each. SIGTERM stops them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from decimal import Decimal

from events.bus import Bus, connect
from jetyard.runtime.heap import tune_collector
from schemas.ids import node_id_for_host
from schemas.settings import NatsSettings
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings

IMAGE = "jetyard-busybox:latest"


def hostname(index: int) -> str:
    return f"sim-{index:05d}"


def agent(bus: Bus, index: int, gpus: int, cpus: int, memory_gib: int) -> NodeAgent:
    settings = AgentSettings(
        hostname=hostname(index), backend="simulated", cpu=Decimal(cpus),
        memory_bytes=memory_gib << 30, simulated_gpus=gpus, simulated_images=(IMAGE,),
    )  # fmt: skip
    backend = SimulatedBackend(node_id_for_host(settings.hostname), settings.simulated_images)
    return NodeAgent(bus, settings, backend)


async def run(count: int, gpus: int, cpus: int, memory_gib: int) -> None:
    bus = await connect(NatsSettings(), name="bench-agents")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tasks = [
        asyncio.create_task(agent(bus, i, gpus, cpus, memory_gib).run(stop)) for i in range(count)
    ]
    print("agents up", flush=True)
    done = await asyncio.gather(*tasks, return_exceptions=True)
    failed = [d for d in done if isinstance(d, BaseException)]
    if failed:
        logging.error("%d agents failed; the first: %r", len(failed), failed[0])
    await bus.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("count", type=int)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--cpus", type=int, default=256)
    parser.add_argument("--memory-gib", type=int, default=2048)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    tune_collector()
    import uvloop

    uvloop.install()
    asyncio.run(run(args.count, args.gpus, args.cpus, args.memory_gib))


if __name__ == "__main__":
    main()
