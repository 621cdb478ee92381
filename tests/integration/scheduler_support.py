"""Helpers for scheduler tests on a real nats-server: agents simulated by writing their own
events (``FakeAgent``), session commands, and waiting for what the log shows."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from commands.agent import Agent
from commands.bus import CommandBus
from commands.messages import CreateSession
from commands.node.aggregate import Node
from commands.repository import load, pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause, StoredEvent
from events.store import EventStore
from events.writes import AggregateRef
from schemas.devices import DeviceInfo
from schemas.ids import new_id, node_id_for_host, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionStatus
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.scheduler.service import Scheduler

GIB = 1 << 30
T = TypeVar("T")
StartScheduler = Callable[..., Awaitable[Scheduler]]


def slots(cpu: float = 1, mem: float = 1, gpu: int = 0) -> ResourceSlots:
    return ResourceSlots(
        cpu_milli=round(cpu * 1000), memory_bytes=round(mem * GIB), gpu_hundredths=gpu * 100
    )


def now() -> datetime:
    return datetime.now(UTC)


class FakeAgent:
    """Writes on ``ev.agent.<id>`` what the agent of one machine would report."""

    def __init__(
        self,
        store: EventStore,
        capacity: ResourceSlots,
        images: tuple[str, ...],
        group: str = "default",
        volumes: tuple[str, ...] = (),
    ):
        self.store = store
        self.group = group
        self.volumes = volumes
        self.hostname = f"host-{new_id()[:8]}"
        self.id = node_id_for_host(self.hostname)
        self.capacity = capacity
        self.images = images
        self.agent: Agent | None = None
        self.seq = 0

    async def register(self, epoch: int = 1, capacity: ResourceSlots | None = None) -> None:
        capacity = capacity or self.capacity
        # One device per whole GPU of the capacity, as an agent's discovery lists them.
        devices = tuple(
            DeviceInfo(kind="cuda", index=i, uuid=f"GPU-{self.id}-{i}")
            for i in range(capacity.gpu_hundredths // 100)
        )
        if self.agent is None:
            self.agent = Agent.register(
                self.id, epoch=epoch, hostname=self.hostname, backend="simulated",
                capacity=capacity, images=self.images, now=now(), devices=devices,
                resource_group=self.group, volumes=self.volumes,
            )  # fmt: skip
        else:
            self.agent.reregister(
                epoch=epoch, hostname=self.hostname, backend="simulated",
                capacity=capacity, images=self.images, now=now(), devices=devices,
                resource_group=self.group,
            )  # fmt: skip
        await self._write()

    async def started(self, kernel_id: str, session_id: str) -> None:
        assert self.agent is not None
        self.agent.kernel_started(kernel_id, session_id, f"jy-{kernel_id}", now())
        await self._write()

    async def exited(self, kernel_id: str, code: int) -> None:
        assert self.agent is not None
        self.agent.kernel_exited(kernel_id, code, "exited", now())
        await self._write()

    async def failed(self, kernel_id: str, session_id: str, reason: str) -> None:
        assert self.agent is not None
        self.agent.kernel_failed_to_start(kernel_id, session_id, reason, now())
        await self._write()

    async def _write(self) -> None:
        assert self.agent is not None
        cause = Cause(
            causation_id=new_id(), correlation_id=new_id(),
            actor=Actor.service(f"agent-{self.id[:8]}"), tenant=SYSTEM_TENANT,
        )  # fmt: skip
        write = pending_write((self.agent, self.seq), cause)
        assert write is not None
        self.seq = (await self.store.append(write)).last_seqs[self.agent.ref]


def create(
    image: str, need: ResourceSlots, owner: SessionOwner, *, kernels: int = 1, **fields: Any
) -> CreateSession:
    """A session of ``kernels`` identical kernels running ``sleep 60`` unless ``fields`` say
    another ``command``; ``fields`` set the rest of its spec."""
    spec = SessionSpec(
        image=image,
        kernels=tuple(KernelSpec(resources=need) for _ in range(kernels)),
        command=fields.pop("command", ("sleep", "60")),
        env={"JY_TEST": "1"},
        **fields,
    )
    return CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec, owner=owner)


async def eventually(
    check: Callable[[], Awaitable[T | None]], timeout: float = 5.0, what: str = ""
) -> T:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if loop.time() > deadline:
            raise AssertionError(f"not true after {timeout}s: {what or check}")
        await asyncio.sleep(0.02)


async def history(store: EventStore, kind: AggregateType, aggregate_id: str) -> list[StoredEvent]:
    return (await store.read(AggregateRef(kind, aggregate_id))).events


async def session_in(store: EventStore, session_id: str, status: SessionStatus) -> Session:
    async def check() -> Session | None:
        session = (await load(store, Session, session_id)).aggregate
        return session if session is not None and session.status is status else None

    return await eventually(check)


async def node_of(store: EventStore, agent: FakeAgent) -> Node:
    async def check() -> Node | None:
        return (await load(store, Node, agent.id)).aggregate

    return await eventually(check)


async def placed(
    store: EventStore, commands: CommandBus, image: str, need: ResourceSlots, owner: SessionOwner
) -> Session:
    cmd = create(image, need, owner)
    outcome = await commands.execute(cmd, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    return await session_in(store, session_id_for(cmd.command_id), SessionStatus.SCHEDULED)


async def reason_of(store: EventStore, session_id: str, contains: str) -> str:
    """The session's pending reason, once it contains ``contains``."""

    async def check() -> str | None:
        session = (await load(store, Session, session_id)).aggregate
        return session.reason if session and contains in session.reason else None

    return await eventually(check)


async def requested(
    bus: Bus, image: str, owner: SessionOwner, need: ResourceSlots, **fields: Any
) -> str:
    """Send a create for one kernel of ``need`` and return the session id, once accepted."""
    cmd = create(image, need, owner, **fields)
    outcome = await CommandBus(bus).execute(cmd, timeout=5)
    assert outcome is not None and outcome.accepted, outcome
    return session_id_for(cmd.command_id)
