"""Helpers for the serving controller's tests on a real nats-server: the controller itself
(a fresh durable and lease of its own), one machine whose agent is driven by hand
(``Machine``: it starts the kernels the real scheduler placed on it, each a real HTTP server on
127.0.0.1 reported as the replica's ``inference`` app, and stops those the scheduler ends), and
waiting for what the endpoint's log shows."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from aiohttp import web

from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus
from events.cancelling import cancelling
from events.catalogue import CATALOGUE, Event
from events.domain.serving import ReplicaRequested
from events.store import EventStore
from events.writes import AggregateRef
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.serving import INFERENCE_APP
from schemas.session import SessionStatus
from schemas.subjects import COMMANDS_STREAM, AggregateType
from services.serving.service import ServingService
from services.serving.settings import ServingSettings
from tests.integration.scheduler_support import FakeAgent, eventually

E = TypeVar("E", bound=Event)
SESSION_COMMANDS = "cmd.session.>"
BROKEN = "broken"
"""An image tag whose replicas' servers answer their health check 503 (the model fails)."""


def settings() -> ServingSettings:
    return ServingSettings(
        durable=f"serving-test-{new_id()[:8]}", lease_key=f"serving-test-{new_id()[:8]}",
        poll_timeout_s=0.25, command_fetch_timeout_s=0.2, tick_s=0.1, resend_after_s=0.5,
    )  # fmt: skip


@contextlib.asynccontextmanager
async def controller(bus: Bus) -> AsyncIterator[ServingService]:
    """The controller for the block; on leaving, the session commands it sent are left to
    the test's scheduler to take (or taken and dropped when none runs): a command left in the
    work queue would reach the next test that takes ``cmd.session.*``."""
    service = ServingService(bus, settings())
    await service.start()
    try:
        yield service
    finally:
        await service.stop()
        with contextlib.suppress(Exception):
            await bus.js.delete_consumer(COMMANDS_STREAM, service.settings.durable)
        await drain_session_commands(bus)


async def session_commands_left(bus: Bus) -> int:
    info = await bus.js.stream_info(COMMANDS_STREAM, subjects_filter=SESSION_COMMANDS)
    return sum((info.state.subjects or {}).values())


async def drain_session_commands(bus: Bus, wait_s: float = 10.0) -> None:
    """Wait (at most ``wait_s``) for the scheduler to take every ``cmd.session.*`` left; then
    take and drop what no scheduler took (none runs: no other consumer holds the filter)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while await session_commands_left(bus) and loop.time() < deadline:  # noqa: ASYNC110 (polled)
        await asyncio.sleep(0.1)
    if not await session_commands_left(bus):
        return
    durable = f"drain-{new_id()[:8]}"
    with contextlib.suppress(Exception):  # another consumer holds the filter: it takes them
        sub = await bus.js.pull_subscribe(SESSION_COMMANDS, durable=durable, stream=COMMANDS_STREAM)
        try:
            while await session_commands_left(bus):
                for message in await sub.fetch(256, timeout=1):
                    await message.ack()
        finally:
            await bus.js.delete_consumer(COMMANDS_STREAM, durable)


@dataclass
class Replica:
    """One replica's model server: a real HTTP server on 127.0.0.1."""

    runner: web.AppRunner
    address: str
    health: int = 200
    requests: int = 0


async def serve(health: int) -> Replica:
    app = web.Application()
    replica: Replica | None = None

    async def check(_: web.Request) -> web.Response:
        assert replica is not None
        replica.requests += 1
        if replica.health == 200:
            return web.Response(text="ok")
        return web.Response(status=replica.health, text="model failed to load")

    app.router.add_get("/health", check)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    replica = Replica(runner, f"{host}:{port}", health)
    return replica


@dataclass
class Machine:
    """A node whose agent's facts the test writes: every session of ``sessions()`` the
    scheduler placed here starts (a real server answers its probes), and every session the
    scheduler is ending stops."""

    store: EventStore
    agent: FakeAgent
    sessions: Callable[[], list[str]]
    replicas: dict[str, Replica] = field(default_factory=dict)
    """Session id -> its running server."""
    stopped: set[str] = field(default_factory=set)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Machine:
        await self.agent.register()
        self._task = asyncio.create_task(self._drive(), name="serving-test-machine")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for replica in self.replicas.values():
            await replica.runner.cleanup()

    async def _drive(self) -> None:
        while not cancelling():  # a cancellation lost in a read must still end it
            for session_id in self.sessions():
                session = (await load(self.store, Session, session_id)).aggregate
                if session is not None:
                    await self._follow(session)
            await asyncio.sleep(0.05)

    async def _follow(self, session: Session) -> None:
        kernel = session.main_kernel
        if session.status is SessionStatus.SCHEDULED and session.id not in self.replicas:
            health = 503 if session.spec.image.endswith(BROKEN) else 200
            replica = self.replicas[session.id] = await serve(health)
            await self.agent.started(kernel, session.id)
            port = ReportedPort(
                name=INFERENCE_APP, protocol=PortProtocol.PREOPEN,
                port=session.spec.service_port or 0, address=replica.address,
                state=PortState.NOT_PROBED,
            )  # fmt: skip
            assert self.agent.agent is not None
            self.agent.agent.report_service_ports(kernel, [port], now())
            await self.agent._write()
        elif session.status is SessionStatus.TERMINATING:
            if session.id not in self.replicas and session.id not in self.stopped:
                await self.agent.started(kernel, session.id)  # ended before it was started
                self.replicas[session.id] = await serve(503)
            await self.kill(session.id, 143)

    async def kill(self, session_id: str, code: int = 137) -> None:
        """The replica's container ends (its server stops answering)."""
        replica = self.replicas.pop(session_id, None)
        if replica is None:
            return
        self.stopped.add(session_id)
        await replica.runner.cleanup()
        session = (await load(self.store, Session, session_id)).aggregate
        assert session is not None
        await self.agent.exited(session.main_kernel, code)


def now() -> datetime:
    return datetime.now(UTC)


def machine(store: EventStore, image: str, service: ServingService) -> Machine:
    capacity = ResourceSlots(cpu_milli=64_000, memory_bytes=256 << 30)
    agent = FakeAgent(store, capacity, (f"{image}:1", f"{image}:2", f"{image}:{BROKEN}"))
    return Machine(store, agent, lambda: list(service.state.replica_of))


async def events_of(store: EventStore, endpoint_id: str, kind: type[E]) -> list[E]:
    history = await store.read(AggregateRef(AggregateType.ENDPOINT, endpoint_id))
    found = [CATALOGUE.decode(e.envelope) for e in history.events]
    return [e for e in found if isinstance(e, kind)]


async def wait_for(
    store: EventStore,
    endpoint_id: str,
    kind: type[E],
    count: int = 1,
    where: Callable[[E], bool] = lambda e: True,
    timeout: float = 20.0,
) -> list[E]:
    """The endpoint's ``kind`` events matching ``where``, once there are ``count``."""

    async def check() -> list[E] | None:
        found = [e for e in await events_of(store, endpoint_id, kind) if where(e)]
        return found if len(found) >= count else None

    try:
        return await eventually(check, timeout, f"{count} {kind.__name__} on {endpoint_id}")
    except AssertionError as exc:
        history = await events_of(store, endpoint_id, Event)
        lines = "\n".join(f"  {type(e).__name__} {e.model_dump(exclude={'spec', 'owner'})}"
                          for e in history)  # fmt: skip
        for e in history:
            if isinstance(e, ReplicaRequested):
                session = (await load(store, Session, e.session_id)).aggregate
                said = session.history if session is not None else "no session"
                lines += f"\n  replica {e.replica}'s session: {said}"
        raise AssertionError(f"{exc}; the endpoint's log:\n{lines}") from None
