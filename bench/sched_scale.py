"""Scheduling at scale: ``CreateSession`` sent → ``SessionScheduled`` observed, with 1,000
simulated agents of 8 GPUs, 20,000 sessions of mixed sizes and quota admission on, next to the
store's ceilings measured in the same run.

Layout (each its own process): a nats-server child (file storage, R1, default sync unless
``--sync-always``); the scheduler (``jetyard serve scheduler``, uvloop); the agents
(``bench.sched_agents``: N real ``NodeAgent``s on the simulated backend in one process, each
with its own ledger tail, heartbeat and reconcile loop, so every placement is also started and
reported back as ``KernelStarted``); this client (uvloop), which writes the tenancy, sends
``CreateSession`` commands (at most ``--window`` sessions sent and not yet decided, i.e. neither
scheduled nor given a pending reason), and watches ``ev.session.*`` through a JetStream
consumer. Projections do not run. The mix and the tenancy are in ``bench.sched_cluster``.

With ``--seal`` a sealer runs too (``jetyard serve sealer``, a fresh key in the temporary
directory, default settings: a seal per 1,000 events or 5 s), so that runs without and with it
give the seal writer's cost; its CPU is reported with the other processes'.

Sessions that are never scheduled (e.g. fractional GPUs before device-level placement) are
counted and reported with their pending reasons; the rate counts scheduled sessions only.

Run:  python -m bench.sched_scale [--agents 1000] [--sessions 20000]     (the full form)
      python -m bench.sched_scale --agents 100 --sessions 2000            (a short form)
      python -m bench.sched_scale --agents 100 --sessions 2000 --seal     (the same, sealed)
The last line is ``sessions_per_s: N``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from nats.js import api

from bench.foundation import awaited_store, group_commit
from bench.sched_agents import IMAGE
from bench.sched_cluster import (
    SCHEDULING,
    fragmentation,
    owners,
    read_cluster,
    resources,
    session_mix,
)
from bench.sched_watch import Watch, follow, outcome_counts, report, wait_nodes
from commands.bus import CommandBus
from commands.messages import CreateSession
from events.audit.log_io import last_seal
from events.audit.seals import new_key_files
from events.bus import Bus, connect, ensure_streams
from events.store import EventStore
from jetyard.runtime.natsserver import NatsServer, free_port
from schemas.ids import session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import KernelSpec, SessionSpec
from schemas.settings import NatsSettings
from schemas.subjects import (
    ACCESS_STREAM,
    COMMANDS_STREAM,
    EVENT_NAME_HEADER,
    EVENTS_STREAM,
    OUTCOMES_STREAM,
    OUTPUT_STREAM,
)


async def send_all(bus: Bus, args: argparse.Namespace, watch: Watch) -> float:
    store = EventStore(bus)
    capacity = args.agents * args.gpus * 100
    owned = await owners(store, args.projects, capacity)
    sizes = session_mix(args.sessions, args.seed)
    start_seq = await store.stream_last_seq() + 1
    stop = asyncio.Event()
    watcher = asyncio.create_task(follow(bus, start_seq, watch, stop))
    commands, actor = CommandBus(bus), Actor.service("bench")
    sends: set[asyncio.Task[object]] = set()
    begin = time.perf_counter()
    for index, size in enumerate(sizes):
        spec = SessionSpec(image=IMAGE, kernels=(KernelSpec(resources=resources(size)),))
        owner = owned[index % len(owned)]
        cmd = CreateSession(actor=actor, tenant=SYSTEM_TENANT, spec=spec, owner=owner)
        session_id = session_id_for(cmd.command_id)
        watch.sent[session_id] = watch.last_send = time.perf_counter()
        watch.gpu[session_id], watch.commands[session_id] = size, cmd.command_id
        sends.add(asyncio.create_task(commands.send(cmd)))
        if len(sends) >= 256:  # publishes awaiting their ack
            _, sends = await asyncio.wait(sends, return_when=asyncio.FIRST_COMPLETED)
        # A refused create is never decided: a window that stops moving is not waited on.
        while watch.undecided() > args.window and not watch.quiet(args.quiet_s):
            watch.decided.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.decided.wait(), 1.0)
    await asyncio.gather(*sends)
    # Done when every session is scheduled, or nothing changed for a while (what waits then
    # waits for good: nothing ends in this bench), or at the deadline.
    deadline = time.perf_counter() + args.max_wait_s
    while time.perf_counter() < deadline and len(watch.scheduled) < len(watch.sent):
        if watch.quiet(args.quiet_s):
            break
        await asyncio.sleep(0.1)
    stop.set()
    await watcher
    return begin


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_child(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),
    )  # fmt: skip


def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = NatsServer(
            data_dir=Path(tmp) / "nats", token="bench", sync_always=args.sync_always,
            monitor_port=free_port(),
        ).start()  # fmt: skip
        settings = NatsSettings(url=server.url, token="bench", request_timeout_s=10.0)
        env = {**os.environ, "JETYARD_NATS_URL": server.url, "JETYARD_NATS_TOKEN": "bench"}
        # The agents' files (output positions) in this run's directory, not the user's.
        env["JETYARD_AGENT_DATA_DIR"] = str(Path(tmp) / "agents")
        children: dict[str, subprocess.Popen[bytes]] = {}
        results: dict[str, float] = {}
        notes: list[str] = []
        try:
            asyncio.run(_declare(settings))
            children["scheduler"] = start_child(
                [sys.executable, "-m", "jetyard.cli", "serve", "scheduler"],
                env, Path(tmp) / "scheduler.log",
            )  # fmt: skip
            children["agents"] = start_child(
                [sys.executable, "-m", "bench.sched_agents", str(args.agents),
                 "--gpus", str(args.gpus)],
                env, Path(tmp) / "agents.log",
            )  # fmt: skip
            if args.seal:
                key_file = Path(tmp) / "sealer.key"
                new_key_files(key_file)
                children["sealer"] = start_child(
                    [sys.executable, "-m", "jetyard.cli", "serve", "sealer"],
                    {**env, "JETYARD_SEALER_KEY_FILE": str(key_file)}, Path(tmp) / "sealer.log",
                )  # fmt: skip
            results.update(asyncio.run(_measure(settings, args, server, children, notes)))
            for child in children.values():
                child.terminate()
            for child in children.values():
                child.wait(60)
            results.update(asyncio.run(_ceilings(settings)))
        finally:
            for name, child in children.items():
                if child.poll() is None:
                    child.kill()
                log = (Path(tmp) / f"{name}.log").read_text(errors="replace")
                errors = [line for line in log.splitlines() if "Traceback" in line]
                if errors:
                    notes.append(f"{name}: {len(errors)} tracebacks in its log")
            server.stop()
    sync = "always" if args.sync_always else "default (2 min)"
    sealer = ", sealer process" if args.seal else ""
    print(
        f"# sched_scale: {args.sessions} sessions, {args.agents} simulated agents x {args.gpus} "
        f"GPUs, {args.projects} projects/keypairs, admission on, window {args.window}\n"
        f"# layout: nats-server (file storage, R1, sync {sync}), scheduler process, agents "
        f"process (real NodeAgents, simulated backend), client process{sealer}; no projections\n"
        f"# group: {SCHEDULING.queue_policy.value}, {SCHEDULING.agent_selection.value}, "
        f"head of line {SCHEDULING.head_of_line.value}, fragmentation guard "
        f"{'on' if SCHEDULING.fragmentation_guard else 'off'}, {SCHEDULING.device_fill.value}"
    )
    width = max(len(k) for k in results)
    for key, value in results.items():
        print(f"{key:<{width}}  {value:>12,.2f}")
    for note in notes:
        print(f"# {note}")
    print(f"sessions_per_s: {results['sessions scheduled per second (send -> observed)']:.1f}")


async def _declare(settings: NatsSettings) -> None:
    bus = await connect(settings, name="bench")
    await ensure_streams(bus)
    await bus.close()


async def _measure(
    settings: NatsSettings,
    args: argparse.Namespace,
    server: NatsServer,
    children: dict[str, subprocess.Popen[bytes]],
    notes: list[str],
) -> dict[str, float]:
    bus = await connect(settings, name="bench-client")
    results: dict[str, float] = {}
    registering = 60 + args.agents / 10
    results["agents registered after (s)"] = await wait_nodes(bus, args.agents, registering)
    assert server.process is not None
    pids = {"nats-server": server.process.pid, **{k: c.pid for k, c in children.items()}}
    idle = {k: cpu_seconds(p) for k, p in pids.items()}
    await asyncio.sleep(args.idle_s)
    for name, pid in pids.items():
        share = (cpu_seconds(pid) - idle[name]) / args.idle_s * 100
        results[f"idle CPU % of a core: {name}"] = share
    before = {k: cpu_seconds(p) for k, p in pids.items()}
    client_before = time.process_time()
    traffic = await _traffic(server, bus)
    watch = Watch()
    begin = await send_all(bus, args, watch)
    results.update(report(watch, begin))
    # Over the active part (send to the last change seen); the quiet tail adds ~idle.
    active = max(watch.last_change, watch.last_send) - begin
    used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    used["client"] = time.process_time() - client_before
    for name, seconds in used.items():
        results[f"CPU % of a core while active: {name}"] = seconds / active * 100
    for name, seconds in used.items():
        results[f"CPU ms per session sent: {name}"] = seconds / args.sessions * 1000
    results["CPU ms per session sent, all processes"] = sum(used.values()) / args.sessions * 1000
    # A real cluster's agents run on their own machines: the control plane's cost apart.
    control = sum(seconds for name, seconds in used.items() if name != "agents")
    results["CPU ms per session sent, all but the simulated agents"] = (
        control / args.sessions * 1000
    )
    for name, count in (await _traffic(server, bus)).items():
        results[f"{name} per session sent"] = (count - traffic[name]) / args.sessions
    for name, count in sorted((await _event_names(bus, traffic["events stored"])).items()):
        results[f"events per session sent: {name}"] = count / args.sessions
    sizes = watch.gpu
    demand = sum(sizes.values())
    capacity = args.agents * args.gpus * 100
    placed = sum(sizes[s] for s in watch.scheduled)
    results["GPU hundredths asked for"] = demand
    results["GPU utilisation vs best packing (placed / min(demand, capacity)) %"] = (
        placed / min(demand, capacity) * 100 if demand else 0.0
    )
    results.update(fragmentation(await read_cluster(bus)))
    if "sealer" in children:
        found = await last_seal(bus)
        results["seals stored"] = found[1] if found is not None else 0
        results["events sealed"] = found[0].last if found is not None else 0
    answers = await outcome_counts(bus, list(watch.commands.values()))
    results["creates accepted"] = answers.pop("accepted", 0)
    results["creates without an outcome"] = answers.pop("no outcome", 0)
    for reason, count in answers.most_common(3):
        notes.append(f"{count} creates {reason}")
    reasons = Counter(watch.waiting.values())
    for reason, count in reasons.most_common(3):
        notes.append(f"waiting ({count}): {reason}")
    unscheduled = Counter(sizes[s] for s in watch.sent if s not in watch.scheduled)
    if unscheduled:
        by_size = ", ".join(f"{h / 100:g} GPU: {n}" for h, n in sorted(unscheduled.items()))
        notes.append(f"never scheduled by size: {by_size}")
    await bus.close()
    return results


async def _traffic(server: NatsServer, bus: Bus) -> dict[str, int]:
    """The server's message counters and the events stored so far."""
    assert server.monitor_url is not None
    varz = await asyncio.to_thread(_read_json, f"{server.monitor_url}/varz")
    counts = {
        "server messages in": int(varz["in_msgs"]),
        "server messages out": int(varz["out_msgs"]),
        "events stored": await EventStore(bus).stream_last_seq(),
    }
    # Where they go: what each process sends and receives, what each stream stores.
    connz = await asyncio.to_thread(_read_json, f"{server.monitor_url}/connz?limit=4096")
    for conn in connz.get("connections", []):
        name = str(conn.get("name") or "unnamed")
        for way in ("in", "out"):
            key = f"messages {way}: {name}"
            counts[key] = counts.get(key, 0) + int(conn[f"{way}_msgs"])
    for stream in (COMMANDS_STREAM, OUTCOMES_STREAM, ACCESS_STREAM, OUTPUT_STREAM):
        with contextlib.suppress(Exception):
            counts[f"stored in {stream}"] = (await bus.js.stream_info(stream)).state.last_seq
    return counts


async def _event_names(bus: Bus, after_seq: int) -> Counter[str]:
    """How many of each event were stored after ``after_seq`` (read from the headers only)."""
    names: Counter[str] = Counter()
    last = await EventStore(bus).stream_last_seq()
    config = api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after_seq + 1,
        ack_policy=api.AckPolicy.NONE, headers_only=True, inactive_threshold=30.0,
    )  # fmt: skip
    if last <= after_seq:
        return names
    sub = await bus.js.pull_subscribe("ev.>", stream=EVENTS_STREAM, config=config)
    seen = after_seq
    while seen < last:
        for msg in await sub.fetch(1000, timeout=5):
            names[(msg.headers or {}).get(EVENT_NAME_HEADER, "?")] += 1
            seen = msg.metadata.sequence.stream
    await sub.unsubscribe()
    return names


def _read_json(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:
        found: dict[str, Any] = json.load(response)
    return found


async def _ceilings(settings: NatsSettings) -> dict[str, float]:
    bus = await connect(settings, name="bench-ceilings")
    store = EventStore(bus)
    msgs, batches = await group_commit(store, 2.0, 100)
    out = {
        "ceiling: awaited guarded append/s": await awaited_store(store, 2.0),
        "ceiling: group commit batch 100 (msgs/s)": msgs,
        "ceiling: group commit batch 100 (batches/s)": batches,
    }
    await bus.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per agent")
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--projects", type=int, default=4, help="projects, a keypair each")
    parser.add_argument("--window", type=int, default=1000, help="sessions sent, not decided")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--sync-always", action="store_true", help="server fsyncs every write")
    parser.add_argument("--idle-s", type=float, default=5.0, help="idle CPU sample before")
    parser.add_argument("--quiet-s", type=float, default=5.0, help="stop after no change")
    parser.add_argument("--seal", action="store_true", help="run a sealer process too")
    parser.add_argument("--max-wait-s", type=float, default=120.0, help="after the last send")
    args = parser.parse_args()
    import uvloop

    uvloop.install()
    run(args)


if __name__ == "__main__":
    main()
