"""The workload: sessions sent as the superadmin (the mix of ``bench.sched_cluster``) and
followed on the log until every placed one runs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from bench.console.stack import Stack
from bench.console.support import FOLLOWED, log
from bench.sched_agents import IMAGE
from bench.sched_cluster import resources, session_mix
from commands.bus import CommandBus
from commands.messages import CreateSession
from events.bus import Bus
from events.store import EventStore
from events.tail import Tail
from schemas.ids import session_id_for
from schemas.principal import Actor, ActorKind, Tenant
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import events_of
from schemas.tenancy import SessionOwner, project_id_for


@dataclass
class Sessions:
    """Every session sent, and its status as the log says (PENDING, SCHEDULED or RUNNING)."""

    status: dict[str, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    last_change: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def count(self, status: str) -> int:
        return sum(1 for s in self.status.values() if s == status)

    def undecided(self) -> int:
        return self.count("SENT")


async def follow_sessions(bus: Bus, from_seq: int, seen: Sessions, stop: asyncio.Event) -> None:
    tail = Tail(bus, from_seq=from_seq, subjects=[events_of("session")], names=FOLLOWED)
    rank = {"SENT": 0, "PENDING": 1, "SCHEDULED": 2, "RUNNING": 3}
    new = {"SessionPendingReasonChanged": "PENDING", "SessionScheduled": "SCHEDULED",
           "SessionStarted": "RUNNING"}  # fmt: skip
    while not stop.is_set():
        for message in await tail.fetch_raw(0.5):
            session_id = message.subject.rsplit(".", 1)[1]
            status = new[message.headers.get("Jy-Event", "")]
            if rank[status] > rank[seen.status.get(session_id, "SENT")]:
                seen.status[session_id] = status
            seen.last_change = time.monotonic()
            seen.changed.set()
    await tail.close()


async def populate(
    stack: Stack, bus: Bus, args: argparse.Namespace
) -> tuple[dict[str, Any], Sessions]:
    """Send the sessions as the superadmin's, and wait until every placed one runs."""
    admin = stack.admin()
    project = project_id_for("default", "default")
    owner = SessionOwner(
        access_key=admin["access_key"], user_id=admin["user_id"], project_id=project,
        domain="default",
    )  # fmt: skip
    actor = Actor(kind=ActorKind.KEYPAIR, id=admin["access_key"])
    tenant = Tenant(domain="default", project=project)
    store, commands = EventStore(bus), CommandBus(bus)
    seen, stop = Sessions(last_change=time.monotonic()), asyncio.Event()
    start = await store.stream_last_seq() + 1
    watcher = asyncio.create_task(follow_sessions(bus, start, seen, stop))
    began = time.monotonic()
    sends: set[asyncio.Task[object]] = set()
    for index, size in enumerate(session_mix(args.sessions, args.seed)):
        spec = SessionSpec(
            image=IMAGE, name=f"bench-{index + 1:05d}",
            kernels=(KernelSpec(resources=resources(size)),),
        )  # fmt: skip
        cmd = CreateSession(actor=actor, tenant=tenant, spec=spec, owner=owner)
        session_id = session_id_for(cmd.command_id)
        seen.status[session_id] = "SENT"
        seen.order.append(session_id)
        sends.add(asyncio.create_task(commands.send(cmd)))
        if len(sends) >= 256:
            _, sends = await asyncio.wait(sends, return_when=asyncio.FIRST_COMPLETED)
        while seen.undecided() > 1000 and time.monotonic() - seen.last_change < 10:
            seen.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(seen.changed.wait(), 1.0)
        if (index + 1) % 2000 == 0:
            log(f"sent {index + 1} sessions; {seen.count('RUNNING')} running")
    await asyncio.gather(*sends)
    sent_s = time.monotonic() - began
    # Settled: nothing undecided or starting, and nothing changed for a while.
    deadline = time.monotonic() + args.max_wait_s
    while time.monotonic() < deadline:
        busy = seen.undecided() + seen.count("SCHEDULED")
        if busy == 0 and time.monotonic() - seen.last_change > args.quiet_s:
            break
        if busy and time.monotonic() - seen.last_change > 30:
            break  # nothing moves any more: say what is left
        await asyncio.sleep(0.2)
    stop.set()
    await watcher
    return {
        "sessions sent": len(seen.order),
        "sent in (s)": round(sent_s, 1),
        "settled after (s)": round(time.monotonic() - began, 1),
        "running": seen.count("RUNNING"),
        "waiting (PENDING)": seen.count("PENDING"),
        "placed, not running yet": seen.count("SCHEDULED"),
        "undecided": seen.undecided(),
    }, seen
