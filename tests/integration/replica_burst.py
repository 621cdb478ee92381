"""A burst of sessions through two scheduler replicas on one log, with simulated node agents,
followed on the log and replayed by the independent checker: what the replica test runs in a
short form and ``bench.replicas`` at full size. Writes what the schedulers, the agents and the
burst's ``CreateSession`` commands write."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from commands.bus import CommandBus
from commands.messages import CreateSession
from events.audit.invariants import ENDED, InvariantReport, replay_log
from events.bus import Bus, connect
from events.store import EventStore
from events.tail import Tail
from schemas.ids import session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.settings import NatsSettings
from schemas.subjects import EVENT_NAME_HEADER, AggregateType, events_of
from schemas.tenancy import KeypairPolicyLimits, SessionOwner
from tests.integration.replica_support import IMAGE, agents, replicas, slots, until
from tests.tenancy_support import make_tenancy

KEYPAIRS = 4
"""Each in a domain of its own: with leases on, the replicas share the domains' admission."""


@dataclass(frozen=True)
class Size:
    agents: int
    sessions: int
    timeout_s: float


SHORT = Size(agents=50, sessions=500, timeout_s=60)
FULL = Size(agents=200, sessions=2000, timeout_s=150)


def workload(i: int) -> tuple[tuple[ResourceSlots, ...], tuple[str, ...] | None]:
    """The ``i``-th session's kernels and command. Of every four sessions one holds a GPU to
    the end and two come and go, so demand exceeds the GPUs and sessions wait for exits."""
    kind = i % 4
    if kind == 0:
        return (slots(cpu=2, mem=4, gpu=1),), None  # runs until stopped
    if kind == 1:
        return (slots(cpu=4, mem=8, gpu=2),), ("exit", "0")  # a job that ends at once
    if kind == 2:
        return (slots(cpu=1, mem=1), slots(cpu=1, mem=1)), None  # two kernels, no GPU
    return (slots(cpu=1, mem=2, gpu=1),), ("sleep", "0.2")


def create(i: int, owner: SessionOwner) -> CreateSession:
    kernels, command = workload(i)
    spec = SessionSpec(
        image=IMAGE, kernels=tuple(KernelSpec(resources=k) for k in kernels), command=command
    )
    return CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec, owner=owner)


@dataclass
class Progress:
    """What the log says about the burst's sessions, as followed on ``ev.session.*``."""

    sessions: set[str]
    jobs: set[str]
    """Sessions whose kernels end on their own."""
    scheduled: set[str] = field(default_factory=set)
    ended: dict[str, str] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.scheduled >= self.sessions and self.ended.keys() >= self.jobs

    def __str__(self) -> str:
        return (
            f"{len(self.scheduled & self.sessions)}/{len(self.sessions)} scheduled, "
            f"{len(self.ended.keys() & self.jobs)}/{len(self.jobs)} jobs ended"
        )


async def follow(bus: Bus, progress: Progress, timeout: float) -> None:
    """Until every session is scheduled and every job has ended, or ``timeout``."""
    names = frozenset({"SessionScheduled", *ENDED})
    tail = Tail(bus, subjects=[events_of(AggregateType.SESSION)], names=names)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        while not progress.done and loop.time() < deadline:
            try:
                messages = await tail.fetch_raw(0.5)
            except TimeoutError:  # nats-py's own, raised when the loop is busy: read again
                continue
            for message in messages:
                session_id = message.subject.rsplit(".", 1)[1]
                name = message.headers.get(EVENT_NAME_HEADER, "")
                if name == "SessionScheduled":
                    progress.scheduled.add(session_id)
                else:
                    progress.ended[session_id] = name
    finally:
        await tail.close()


async def burst(
    settings: NatsSettings, size: Size, leases: bool
) -> tuple[Progress, InvariantReport, list[int]]:
    """Agents up, the burst sent, followed until done (or the size's timeout), everything
    stopped, the whole log replayed. Also returns each replica's pass writes."""
    timings: dict[str, float] = {}
    client = await connect(settings, name="replicas-client")
    store = EventStore(client)
    limits = KeypairPolicyLimits(max_containers_per_session=2)
    owners = [(await make_tenancy(store, limits=limits)).owner for _ in range(KEYPAIRS)]
    cmds = [create(i, owners[i % KEYPAIRS]) for i in range(size.sessions)]
    progress = Progress(
        sessions={session_id_for(c.command_id) for c in cmds},
        jobs={session_id_for(c.command_id) for c in cmds if c.spec.command is not None},
    )
    try:
        begin = time.perf_counter()
        async with replicas(settings, leases) as schedulers, agents(settings, size.agents):
            await until(
                f"{size.agents} nodes registered on both replicas",
                size.timeout_s,
                lambda: all(len(s.state.nodes) == size.agents for s in schedulers),
            )
            timings["agents up"] = time.perf_counter() - begin
            begin = time.perf_counter()
            following = asyncio.create_task(follow(client, progress, size.timeout_s))
            commands = CommandBus(client)
            await asyncio.gather(*(commands.send(cmd) for cmd in cmds))
            await following
            timings["all scheduled, jobs ended"] = time.perf_counter() - begin
            if progress.done:
                for scheduler in schedulers:
                    await scheduler.settle()
            writes = [s.store.stats.batches + s.store.stats.appends for s in schedulers]
            conflicts = [s.store.stats.conflicts for s in schedulers]
        begin = time.perf_counter()
        # Settled only if everything happened: a timed-out run may be stopped mid-way.
        report = await replay_log(client, settled=progress.done)
        timings["replay"] = time.perf_counter() - begin
    finally:
        await client.close()
    print(
        f"replicas (leases {'on' if leases else 'off'}), {size.agents} agents, "
        f"{size.sessions} sessions: {progress}; "
        + ", ".join(f"{what} {seconds:.1f}s" for what, seconds in timings.items())
        + f"; pass writes {writes}, conflicts {conflicts}; {report}"
    )
    return progress, report, writes
