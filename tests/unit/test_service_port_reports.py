"""Service ports reported by the agent: the aggregate writes them once per running kernel, the
watch waits for each app up to its bound (on an in-memory store, with a fake backend), and the
sessions view lists them on the session (pure ``apply`` and a batch on SQLite)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta

from sqlalchemy import select

from commands.agent import Agent
from events.domain.agent import KernelServicePortsReported
from events.domain.session import SessionRequested, SessionRequeued
from events.envelope import StoredEvent
from events.memory import InMemoryStore
from events.writes import AggregateRef
from projections.db import create_engine, writing
from projections.sessions import tables as session_tables
from projections.sessions import view as sessions
from projections.sessions.tables import KernelPort, SessionRecord
from schemas.ids import kernel_id_for
from schemas.resources import ResourceSlots
from schemas.service_ports import BACKENDAI_LABEL, PortProtocol, PortState, ReportedPort
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from services.node.record import AgentRecord, PortsFound, Started
from services.node.service_ports import ServicePortWatch, tcp_open
from tests.support import NOW, envelope, ref
from tests.unit.scenario import CAUSE, at

HTTP, TCP, PTY = PortProtocol.HTTP, PortProtocol.TCP, PortProtocol.PTY
OPEN, NEVER, NOT_PROBED = PortState.OPEN, PortState.NEVER_OPENED, PortState.NOT_PROBED


def reported(name: str, protocol: PortProtocol, port: int, state: PortState) -> ReportedPort:
    return ReportedPort(
        name=name, protocol=protocol, port=port, address=f"10.0.0.9:{port}", state=state
    )


JUPYTER, SSH = reported("jupyter", HTTP, 8080, OPEN), reported("ssh", TCP, 2200, NEVER)

# ---- the aggregate ------------------------------------------------------------------------


def running_agent() -> Agent:
    agent = Agent.register(
        "n-1", epoch=1, hostname="h", backend="simulated", capacity=ResourceSlots(), now=at(0)
    )
    agent.kernel_started("k-1", "s-1", "c-1", at(1))
    return agent


def test_ports_are_reported_once_per_running_kernel() -> None:
    agent = running_agent()

    assert agent.report_service_ports("k-1", [JUPYTER, SSH], at(2))
    assert not agent.report_service_ports("k-1", [JUPYTER], at(3))  # once
    assert not agent.report_service_ports("k-9", [JUPYTER], at(3))  # not running here
    assert agent.running["k-1"].ports_reported
    # Reported started again after a restart: still the same kernel, nothing written.
    assert not agent.kernel_started("k-1", "s-1", "c-1", at(4))
    agent.kernel_exited("k-1", 0, "done", at(5))
    assert not agent.report_service_ports("k-1", [JUPYTER], at(6))  # ended meanwhile
    names = [e.name for e in agent.collect(CAUSE)]
    assert names.count("KernelServicePortsReported") == 1


# ---- the watch ----------------------------------------------------------------------------


class FakePorts:
    """A backend's service-port side: labels per container, ports that open after a delay."""

    def __init__(self, labels: Mapping[str, str], opens_after: Mapping[int, float]) -> None:
        self.labels = labels
        self.opens_after = opens_after  # port -> seconds after the first attempt; absent: never
        self.started = asyncio.get_running_loop().time()

    async def image_labels(self, container_id: str) -> Mapping[str, str]:
        return self.labels

    async def address_of(self, container_id: str) -> str | None:
        return "10.0.0.9"

    async def port_open(self, host: str, port: int) -> bool:
        after = self.opens_after.get(port)
        return after is not None and asyncio.get_running_loop().time() - self.started >= after


async def a_record(*kernels: str) -> tuple[AgentRecord, InMemoryStore]:
    store = InMemoryStore()
    record = AgentRecord(store, "n-1")
    await record.register(
        hostname="h", backend="simulated", capacity=ResourceSlots(), devices=(), images=(), now=NOW
    )
    await record.report([Started(k, "s-1", f"c-{k}") for k in kernels], NOW)
    return record, store


def written(store: InMemoryStore) -> list[tuple[str, dict[str, object]]]:
    return [(e.envelope.name, e.envelope.payload) for e in store.events()]


async def until_reported(record: AgentRecord, kernel_id: str) -> None:
    async with asyncio.timeout(5):
        while not record.running[kernel_id].ports_reported:  # noqa: ASYNC110 (polled state)
            await asyncio.sleep(0.02)


async def test_each_app_is_open_never_opened_or_not_probed() -> None:
    record, store = await a_record("k-1")
    label = "jupyter:http:8080,ssh:tcp:2200,ttyd:pty:7681"
    watch = ServicePortWatch(
        FakePorts({BACKENDAI_LABEL: label}, {8080: 0.1}), record, open_within_s=0.4, retry_s=0.02
    )
    task = asyncio.create_task(watch.run())
    try:
        await until_reported(record, "k-1")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    reports = [p for name, p in written(store) if name == "KernelServicePortsReported"]
    assert len(reports) == 1
    event = KernelServicePortsReported.model_validate(reports[0])
    assert event.kernel_id == "k-1" and event.session_id == "s-1"
    assert [(p.name, p.address, p.state) for p in event.ports] == [
        ("jupyter", "10.0.0.9:8080", OPEN),
        ("ssh", "10.0.0.9:2200", NEVER),
        ("ttyd", "10.0.0.9:7681", NOT_PROBED),
    ]


async def test_an_image_without_apps_writes_nothing_and_is_not_probed_again() -> None:
    record, store = await a_record("k-1")
    backend = FakePorts({"maintainer": "me"}, {})
    watch = ServicePortWatch(backend, record, open_within_s=0.1)

    watch.look()
    await asyncio.sleep(0.05)
    watch.look()  # remembered: no second probe
    await asyncio.sleep(0.05)

    assert [name for name, _ in written(store)] == ["AgentRegistered", "KernelStarted"]


async def test_an_inference_kernel_serves_its_allocated_port_whatever_its_image_says() -> None:
    # Its image declares nothing (or an app on the same port, which the served port replaces):
    # the port its allocation names is reported as the app ``inference``, unprobed (a model
    # may load for minutes: the serving controller's probes say when it answers).
    record, store = await a_record("k-1", "k-2")
    labels = {BACKENDAI_LABEL: "web:http:8000,ssh:tcp:2200"}
    ports = {"k-1": 8000, "k-2": None}
    watch = ServicePortWatch(
        FakePorts(labels, {8000: 0, 2200: 0}), record, open_within_s=0.2, retry_s=0.02,
        inference_port=ports.get,
    )  # fmt: skip
    task = asyncio.create_task(watch.run())
    try:
        await until_reported(record, "k-1")
        await until_reported(record, "k-2")
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    events = [
        KernelServicePortsReported.model_validate(p)
        for name, p in written(store)
        if name == "KernelServicePortsReported"
    ]
    apps = {
        e.kernel_id: [(p.name, p.protocol, p.address, p.state) for p in e.ports] for e in events
    }
    assert apps["k-1"] == [
        ("ssh", TCP, "10.0.0.9:2200", OPEN),
        ("inference", PortProtocol.PREOPEN, "10.0.0.9:8000", NOT_PROBED),
    ]
    assert [name for name, *_ in apps["k-2"]] == ["web", "ssh"]


async def test_a_kernel_that_ended_while_awaited_writes_nothing() -> None:
    record, store = await a_record("k-1")
    await record.report([PortsFound("k-9", (JUPYTER,))], NOW)  # never ran here

    assert "KernelServicePortsReported" not in [name for name, _ in written(store)]


async def test_a_tcp_connect_sees_a_listener_and_its_absence() -> None:
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await tcp_open("127.0.0.1", port)
    finally:
        server.close()
        await server.wait_closed()
    assert not await tcp_open("127.0.0.1", port, timeout_s=0.5)


# ---- the sessions view --------------------------------------------------------------------

ONE = KernelSpec(resources=ResourceSlots(cpu_milli=1000))
SPEC = SessionSpec(image="lab:1", kernels=(ONE, ONE))


def session_event(seq: int, session: AggregateRef, version: int, event: object) -> StoredEvent:
    assert hasattr(event, "event_name") and hasattr(event, "model_dump")
    env = envelope(session, version, name=event.event_name, payload=event.model_dump(mode="json"))
    return StoredEvent(seq, env.model_copy(update={"occurred_at": NOW + timedelta(seconds=seq)}))


def agent_event(seq: int, kernel_id: str, session_id: str, *ports: ReportedPort) -> StoredEvent:
    event = KernelServicePortsReported(kernel_id=kernel_id, session_id=session_id, ports=ports)
    return session_event(seq, AggregateRef(AggregateType.AGENT, "n-1"), seq, event)


def requested(session: AggregateRef) -> SessionRecord:
    kernels = tuple(kernel_id_for(session.id, i) for i in range(2))
    event = SessionRequested(spec=SPEC, kernel_ids=kernels)
    row, _ = sessions.apply(None, session_event(1, session, 1, event))
    assert row is not None
    return row


def step(row: SessionRecord, event: StoredEvent) -> SessionRecord:
    after, entry = sessions.apply(row, event)
    assert after is not None and entry is None  # ports change no status
    return after


def test_the_view_lists_each_kernels_ports_in_kernel_order() -> None:
    s = ref()
    row = requested(s)
    main, sub = row.kernel_ids

    row = step(row, agent_event(2, sub, s.id, SSH))
    row = step(row, agent_event(3, main, s.id, JUPYTER))

    assert [(p.kernel_id, p.name, p.state) for p in row.service_ports] == [
        (main, "jupyter", OPEN),
        (sub, "ssh", NEVER),
    ]
    assert step(row, agent_event(3, main, s.id)) == row  # seen already
    assert step(row, agent_event(4, "k-elsewhere", s.id, JUPYTER)) == row  # not its kernel


def test_a_requeued_session_starts_its_list_again() -> None:
    s = ref()
    row = step(requested(s), agent_event(2, kernel_id_for(s.id, 0), s.id, JUPYTER))
    again = SessionRequeued(reason="node lost", kernel_ids=("k-new-0", "k-new-1"), attempt=1)

    after, _ = sessions.apply(row, session_event(3, s, 2, again))

    assert row.service_ports and after is not None and after.service_ports == ()


async def test_a_batch_keys_agent_events_by_their_session_on_sqlite() -> None:
    engine = create_engine("sqlite+aiosqlite://")
    t = session_tables.tables()
    s = ref()
    kernels = tuple(kernel_id_for(s.id, i) for i in range(2))
    batch = [
        session_event(1, s, 1, SessionRequested(spec=SPEC, kernel_ids=kernels)),
        agent_event(2, kernels[0], s.id, JUPYTER),
    ]
    try:
        async with writing(engine) as conn:
            await conn.run_sync(t.metadata.create_all)
        for _ in range(2):  # a redelivery changes nothing
            async with writing(engine) as conn:
                await sessions.apply_batch(conn, "", batch)
        async with engine.connect() as conn:
            (row,) = (await conn.execute(select(t.sessions))).all()
        record = session_tables.from_row(row)
        assert record.service_ports == (KernelPort(kernel_id=kernels[0], **JUPYTER.model_dump()),)
    finally:
        await engine.dispose()
