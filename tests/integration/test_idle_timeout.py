"""The idle timeout through the real scheduler on the real nats-server: a keypair policy's
``idle_timeout_s`` ends an interactive session nobody used for that long, with the rule as its
reason, and spares one that keeps printing (the simulated agent reports its output) or whose
app keeps getting traffic (a real app proxy reports it); with
``idle_utilization_threshold_pct`` a session that prints but uses no CPU ends too, and one that
keeps its CPU busy is spared. The reports are on the reporters' own ``ev.activity.<id>``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from commands.activity_reports import PER_WRITE, ActivityReports
from commands.repository import load
from commands.session.aggregate import Session
from events.bus import Bus
from events.catalogue import CATALOGUE
from events.domain.activity import REPORTS_PER_EVENT, ActivityReport, SessionActivityReported
from events.store import EventStore
from events.writes import AggregateRef
from schemas.activity import ActivitySource
from schemas.ids import new_id, node_id_for_host
from schemas.principal import Actor
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus, SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import KeypairPolicyLimits
from services.appproxy.service import AppProxyService
from services.appproxy.settings import AppProxySettings
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings
from tests.integration.scheduler_support import (
    FakeAgent,
    StartScheduler,
    eventually,
    node_of,
    requested,
    session_in,
    slots,
)
from tests.tenancy_support import make_tenancy

NEED = ResourceSlots(cpu_milli=500, memory_bytes=64 << 20)
TIMEOUT_S = 3
INTERVAL_S = 0.3
IDLE = f"idle: no app or terminal traffic and no output for {TIMEOUT_S}s"
POLICY = KeypairPolicyLimits(idle_timeout_s=TIMEOUT_S)
WAIT_S = 20.0


async def session(store: EventStore, session_id: str) -> Session:
    found = (await load(store, Session, session_id)).aggregate
    assert found is not None
    return found


async def reasons(store: EventStore, session_id: str) -> list[tuple[SessionStatus, str]]:
    return [(h.status, h.reason) for h in (await session(store, session_id)).history]


async def activity(store: EventStore, reporter_id: str) -> list[ActivityReport]:
    """Every report the reporter wrote, in order."""
    history = await store.read(AggregateRef(AggregateType.ACTIVITY, reporter_id))
    found = [CATALOGUE.decode(e.envelope) for e in history.events]
    return [r for e in found if isinstance(e, SessionActivityReported) for r in e.reports]


@contextlib.asynccontextmanager
async def simulated_agent(bus: Bus, image: str) -> AsyncIterator[SimulatedBackend]:
    """A real node agent on the simulated backend, reporting activity every ``INTERVAL_S``."""
    settings = AgentSettings(
        hostname=f"sim-{new_id()[:8]}", backend="simulated", simulated_images=(image,),
        activity_interval_s=INTERVAL_S,
    )  # fmt: skip
    backend = SimulatedBackend(node_id_for_host(settings.hostname), [image])
    agent = NodeAgent(bus, settings, backend)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop), name="idle-test-agent")

    async def registered() -> bool:
        if task.done():
            task.result()
        return agent.record.epoch > 0

    try:
        await eventually(registered, WAIT_S, "the agent registered")
        yield backend
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_idle_session_ends_with_the_idle_reason_and_a_printing_one_is_spared(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    owner = (await make_tenancy(store, limits=POLICY)).owner
    await start_scheduler()
    async with simulated_agent(bus, image) as machine:
        # Idle: prints its one start line, then sleeps. Busy: a line every 0.1 s for 6 s,
        # twice the timeout, then exits 0 by itself.
        idle = await requested(bus, image, owner, NEED, type=SessionType.INTERACTIVE)
        busy = await requested(
            bus, image, owner, NEED, type=SessionType.INTERACTIVE, command=("print", "60", "6")
        )
        await session_in(store, busy, SessionStatus.RUNNING)

        async def idle_ended() -> bool:
            return (await session(store, idle)).status.is_terminal

        await eventually(idle_ended, WAIT_S, "the idle session ended")
        ending = [r for s, r in await reasons(store, idle) if s is SessionStatus.TERMINATING]
        assert len(ending) == 1 and ending[0].startswith(IDLE), ending
        assert f"keypair {owner.access_key}'s policy idle timeout" in ending[0]
        # Its end keeps the idle timeout as its final reason, not the stopped kernel's exit.
        final = await session_in(store, idle, SessionStatus.TERMINATED)
        assert final.reason == ending[0], final.history
        # The busy one was started at about the same time: past its timeout by now, running.
        assert (await session(store, busy)).status is SessionStatus.RUNNING

        async def busy_exited() -> bool:
            return (await session(store, busy)).status is SessionStatus.TERMINATED

        await eventually(busy_exited, WAIT_S, "the busy session exited by itself")
        spared = await session(store, busy)
        assert spared.exit_code == 0
        assert not any(IDLE in reason for _, reason in await reasons(store, busy))
        reported = await activity(store, machine.node_id)
        assert {e.source for e in reported} == {ActivitySource.OUTPUT}
        assert len([e for e in reported if e.session_id == busy]) >= 2


async def test_app_traffic_through_the_proxy_keeps_a_session_until_it_stops(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    owner = (await make_tenancy(store, limits=POLICY)).owner
    await start_scheduler()
    agent = FakeAgent(store, slots(cpu=8, mem=8), (image,))  # writes no output, ever
    await agent.register()
    await node_of(store, agent)
    proxy_id = f"proxy-{new_id()[:8]}"
    settings = AppProxySettings(
        port=0, token_key="k" * 48, poll_timeout_s=0.2, activity_interval_s=INTERVAL_S,
        proxy_id=proxy_id,
    )  # fmt: skip
    proxy = AppProxyService(bus, settings)
    await proxy.start()
    try:
        used = await requested(bus, image, owner, NEED, type=SessionType.INTERACTIVE)
        unused = await requested(bus, image, owner, NEED, type=SessionType.INTERACTIVE)
        kernels = {}
        for session_id in (used, unused):
            (kernel_id,) = (await session_in(store, session_id, SessionStatus.SCHEDULED)).kernel_ids
            kernels[session_id] = kernel_id
            await agent.started(kernel_id, session_id)
        await session_in(store, used, SessionStatus.RUNNING)

        async def proxy_sees_it_running() -> bool:
            await proxy.sync()
            folded = proxy.table.sessions.get(used)
            return folded is not None and folded.running

        await eventually(proxy_sees_it_running, WAIT_S, "the proxy folded the start")
        loop = asyncio.get_running_loop()
        busy_until = loop.time() + 2 * TIMEOUT_S
        while loop.time() < busy_until:  # a request now and then, and the terminal
            proxy.traffic(used, "jupyter")
            proxy.traffic(used, "terminal")
            await asyncio.sleep(0.2)
        # Twice the timeout after the start: the unused one is gone, the used one runs.
        assert (await session(store, unused)).status is SessionStatus.TERMINATING
        assert (await session(store, used)).status is SessionStatus.RUNNING

        async def used_ending() -> bool:
            return (await session(store, used)).status is SessionStatus.TERMINATING

        await eventually(used_ending, WAIT_S, "the session ended once its traffic stopped")
        assert (await session(store, used)).reason.startswith(IDLE)
        sources = {e.source for e in await activity(store, proxy_id) if e.session_id == used}
        assert sources == {ActivitySource.APP, ActivitySource.TERMINAL}
        assert all(e.session_id == used for e in await activity(store, proxy_id))
        for session_id, kernel_id in kernels.items():
            await agent.exited(kernel_id, 143)
            await session_in(store, session_id, SessionStatus.TERMINATED)
    finally:
        await proxy.stop()


async def test_a_session_that_prints_but_uses_no_cpu_ends_and_a_busy_one_is_spared(
    bus: Bus, store: EventStore, image: str, start_scheduler: StartScheduler
) -> None:
    policy = KeypairPolicyLimits(idle_timeout_s=TIMEOUT_S, idle_utilization_threshold_pct=50)
    owner = (await make_tenancy(store, limits=policy)).owner
    await start_scheduler()
    async with simulated_agent(bus, image) as machine:
        # Both print for twice the timeout; the busy one keeps its half CPU busy (100%).
        printing = ("print", "60", "6")
        lazy = await requested(
            bus, image, owner, NEED, type=SessionType.INTERACTIVE, command=printing
        )
        busy = await requested(
            bus, image, owner, NEED, type=SessionType.INTERACTIVE, command=printing
        )
        (kernel_id,) = (await session_in(store, busy, SessionStatus.RUNNING)).kernel_ids
        machine.set_cpu_load(kernel_id, 0.5)

        async def lazy_ended() -> bool:
            return (await session(store, lazy)).status.is_terminal

        await eventually(lazy_ended, WAIT_S, "the session without CPU use ended")
        ending = [r for s, r in await reasons(store, lazy) if s is SessionStatus.TERMINATING]
        assert len(ending) == 1 and ending[0].startswith(f"idle: CPU under 50% for {TIMEOUT_S}s")
        assert (await session(store, busy)).status is SessionStatus.RUNNING

        async def busy_exited() -> bool:
            return (await session(store, busy)).status is SessionStatus.TERMINATED

        await eventually(busy_exited, WAIT_S, "the busy session exited by itself")
        assert (await session(store, busy)).exit_code == 0
        used = [e for e in await activity(store, machine.node_id) if e.session_id == busy]
        cpu = [e.utilization_pct for e in used if e.source is ActivitySource.CPU]
        assert any(pct is not None and pct > 90 for pct in cpu), cpu  # 100%, once it ran


async def test_a_large_flush_is_stored_whole_on_the_real_server(bus: Bus) -> None:
    """More reports than two events hold (a busy app proxy's flush): every report is stored,
    in events of at most ``REPORTS_PER_EVENT``, over atomic writes the server accepts."""
    store, reporter_id = EventStore(bus), f"proxy-{new_id()[:8]}"
    reporter = ActivityReports(store, reporter_id, Actor.service("appproxy"))
    count = PER_WRITE + REPORTS_PER_EVENT + 1
    now = datetime.now(UTC)
    for n in range(count):
        reporter.note(f"{new_id()}-{n}", None, ActivitySource.APP, now.timestamp())

    assert await reporter.flush(now) == count
    history = await store.read(AggregateRef(AggregateType.ACTIVITY, reporter_id))
    events = [CATALOGUE.decode(e.envelope) for e in history.events]
    sizes = [len(e.reports) for e in events if isinstance(e, SessionActivityReported)]
    assert sizes == [REPORTS_PER_EVENT, REPORTS_PER_EVENT, REPORTS_PER_EVENT, 1]
    assert len(await activity(store, reporter_id)) == count
