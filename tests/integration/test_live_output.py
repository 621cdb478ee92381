"""Live kernel output on the real nats-server with the simulated agent and the real gateway:
10,000 lines printed over 20 s reach a subscriber that joined in the middle and asked from the
start, in order and none twice, across an agent restart; ``sessionLogs`` shows the output so
far while the kernel runs; the cap keeps the tail and says so; another user's subscription is
refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from events.bus import Bus, connect, ensure_streams
from events.store import EventStore
from jetyard.runtime.natsserver import NatsServer
from jetyard.sdk import JetyardAuth
from schemas.ids import new_id, node_id_for_host
from schemas.settings import NatsSettings
from schemas.subjects import OUTPUT_STREAM, output_subject
from schemas.tenancy import SessionOwner, project_id_for
from services.gateway.sessions.output_feed import OutputReader, output_so_far
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.output import published
from services.node.settings import AgentSettings
from tests.integration.gateway_support import Gateway, running_gateway
from tests.integration.node_support import eventually, facts_about
from tests.integration.output_support import end, new_session, run_on, subscribed

IMAGE = "python:3.12"
LINES = 10_000


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("output")) as gw:
        yield gw


def machine() -> tuple[AgentSettings, SimulatedBackend]:
    settings = AgentSettings(
        hostname=f"sim-{new_id()}", backend="simulated", simulated_images=(IMAGE,)
    )
    return settings, SimulatedBackend(node_id_for_host(settings.hostname), [IMAGE])


async def start(bus: Bus, settings: AgentSettings, backend: SimulatedBackend) -> asyncio.Task[None]:
    agent = NodeAgent(bus, settings, backend)
    task = asyncio.create_task(agent.run(asyncio.Event()))

    async def registered() -> int:
        if task.done():
            task.result()
        return agent.record.epoch

    await eventually(registered, what="registration")
    return task


async def crash(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_a_late_subscriber_gets_every_line_once_in_order_across_an_agent_restart(
    bus: Bus, gateway: Gateway
) -> None:
    store = EventStore(bus)
    settings, backend = machine()
    node_id = backend.node_id
    session_id, _ = await new_session(store)
    agent = await start(bus, settings, backend)
    try:
        kernel = await run_on(store, session_id, node_id, IMAGE, ("print", str(LINES), "20"))
        subject = output_subject(session_id, kernel)

        async def printed(n: int) -> bool:
            return (await published(bus, subject)).line > n

        await eventually(lambda: printed(1_000), timeout=15, what="the first 1,000 lines")
        logs = """query($id: ID!) { sessionLogs(id: $id) }"""
        running = await eventually(
            lambda: _logs(gateway, logs, session_id), what="sessionLogs while running"
        )
        assert running.startswith(f"simulated kernel {kernel}: print {LINES} 20\nline 1\n")
        assert f"line {LINES}\n" not in running

        async with subscribed(gateway, gateway.root, session_id, since=0) as (received, task):
            await eventually(lambda: printed(5_000), timeout=20, what="half the lines")
            await crash(agent)
            at_crash = (await published(bus, subject)).line
            await asyncio.sleep(1.0)  # lines printed meanwhile wait in the machine
            agent = await start(bus, settings, backend)
            await eventually(
                lambda: _has(store, node_id, kernel, "KernelExited"), timeout=30, what="exit"
            )
            await end(store, session_id)
            await asyncio.wait_for(task, 30)
    finally:
        await crash(agent)

    assert received.errors == [] and received.completed
    assert 1_000 < at_crash < LINES
    positions = [c["position"] for c in received.chunks]
    sizes = [len(c["lines"]) for c in received.chunks]
    assert positions == [sum(sizes[:i]) for i in range(len(sizes))]  # contiguous from 0
    assert all(c["dropped"] == 0 and c["notice"] is None for c in received.chunks)
    lines = received.lines
    assert lines[0] == f"simulated kernel {kernel}: print {LINES} 20"
    assert lines[1:-1] == [f"line {i}" for i in range(1, LINES + 1)]
    assert lines[-1] == "exited with code 0"
    assert len(received.chunks) < 1_000  # batched, not a message per line


async def _logs(gateway: Gateway, query: str, session_id: str) -> str | None:
    body = await gateway.gql(query, id=session_id)
    assert "errors" not in body, body
    logs: str | None = body["data"]["sessionLogs"]
    return logs


async def _has(store: EventStore, node_id: str, kernel: str, name: str) -> bool:
    return name in await facts_about(store, node_id, kernel)


@pytest.fixture
async def capped(tmp_path: Path) -> AsyncIterator[Bus]:
    """A server of its own whose output stream keeps 4 messages per kernel."""
    server = NatsServer(data_dir=tmp_path / "nats").start()
    try:
        settings = NatsSettings(url=server.url, output_messages_per_kernel=4)
        own = await connect(settings, name="capped")
        await ensure_streams(own)
        try:
            yield own
        finally:
            await own.close()
    finally:
        server.stop()


async def test_the_cap_keeps_the_tail_of_a_kernels_output_and_says_so(capped: Bus) -> None:
    store = EventStore(capped)
    settings, backend = machine()
    session_id, _ = await new_session(store)
    agent = await start(capped, settings, backend)
    try:
        kernel = await run_on(store, session_id, backend.node_id, IMAGE, ("print", "3000", "1"))
        await eventually(
            lambda: _has(store, backend.node_id, kernel, "KernelExited"), what="the exit"
        )
    finally:
        await crash(agent)

    subject = output_subject(session_id, kernel)
    state = await capped.js.stream_info(OUTPUT_STREAM, subjects_filter=subject)
    assert (state.state.subjects or {})[subject] == 4
    text = await output_so_far(capped, session_id, kernel)
    assert text is not None
    head, *kept = text.splitlines()
    assert head.startswith("[jetyard: ") and "dropped" in head
    assert kept[-2:] == ["line 3000", "exited with code 0"]
    dropped = int(head.split()[1])
    assert kept[0] == f"line {dropped}"  # line n is line number n (0 is the first line)

    reader = OutputReader(capped, session_id, kernel, since=2_990)
    try:
        chunks = await reader.caught_up()
    finally:
        await reader.close()
    assert (chunks[0].line, chunks[0].dropped, chunks[0].lines[0]) == (2_990, 0, "line 2990")


async def _ok(gw: Gateway, query: str, **variables: Any) -> dict[str, Any]:
    body = await gw.gql(query, **variables)
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def _user(gw: Gateway, domain: str) -> tuple[SessionOwner, JetyardAuth]:
    project = project_id_for(domain, "lab")
    user = await _ok(
        gw,
        """mutation($e: String!, $d: String!, $p: [ID!]) { createUser(email: $e,
            password: "pw-123456", domain: $d, role: "user", projects: $p) { id } }""",
        e=f"u-{new_id()[:6]}@example.org",
        d=domain,
        p=[project],
    )
    user_id = user["createUser"]["id"]
    keys = await _ok(
        gw, "mutation($u: ID!) { createKeypair(userId: $u) { accessKey secretKey } }", u=user_id
    )
    ak, sk = keys["createKeypair"]["accessKey"], keys["createKeypair"]["secretKey"]
    owner = SessionOwner(access_key=ak, user_id=user_id, project_id=project, domain=domain)
    return owner, JetyardAuth(ak, sk)


async def test_another_users_subscription_is_refused_as_if_there_were_no_session(
    bus: Bus, gateway: Gateway
) -> None:
    domain = f"d-{new_id()[:6]}"
    await _ok(gateway, "mutation($n: String!) { createDomain(name: $n) { id } }", n=domain)
    await _ok(
        gateway, 'mutation($d: String!) { createProject(domain: $d, name: "lab") { id } }', d=domain
    )
    (owner, owner_auth), (_, other_auth) = [await _user(gateway, domain) for _ in range(2)]
    session_id, _ = await new_session(EventStore(bus), owner)

    async with subscribed(gateway, other_auth, session_id) as (refused, task):
        await asyncio.wait_for(task, 10)
    assert [e["message"] for e in refused.errors] == [f"there is no session {session_id}"]

    async with subscribed(gateway, owner_auth, session_id) as (allowed, task):
        await asyncio.sleep(1.5)  # nothing printed yet: it waits, without an error
        assert not task.done() and allowed.errors == []
