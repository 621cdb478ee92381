"""A session's terminal through the real app proxy, to a kernel's container on the real Docker
engine: the session's and its agent's events are written by the test as the scheduler and the
agent would (the agent's registration names its terminal endpoint); the owner's ``startApp``
token opens a shell, another user gets 403, and the session's end closes it (1001)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import websockets
from websockets.asyncio.client import connect

from events.bus import Bus
from events.domain.agent import AgentRegistered, KernelStarted
from events.domain.session import SessionTerminated
from events.store import EventStore
from events.writes import AggregateRef, Write
from schemas.ids import new_id
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from schemas.terminal_tokens import TERMINAL
from tests.integration.appproxy_support import ALICE, BOB, FakeSession, running_proxy, token
from tests.integration.terminal_support import (
    TERMINAL_KEY,
    Kernel,
    kernel_with_terminal,
    read_until,
)
from tests.support import envelope


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    async with kernel_with_terminal(tmp_path) as kernel:
        yield kernel


async def _session_on(store: EventStore, kernel: Kernel) -> FakeSession:
    """Alice's running session whose main kernel is ``kernel``, started by an agent that
    serves terminals where ``kernel``'s does."""
    session = FakeSession(store, id=kernel.session_id, kernel=kernel.id)
    await session.start(ALICE, [])
    node = AggregateRef(AggregateType.AGENT, new_id())
    registered = AgentRegistered(
        epoch=1, hostname="h", backend="docker", capacity=ResourceSlots.of(cpu=1, memory=1 << 30),
        terminal_url=kernel.terminal_url,
    )  # fmt: skip
    started = KernelStarted(kernel_id=kernel.id, session_id=kernel.session_id, container_id="c")
    events = [
        envelope(node, n, name=e.event_name, payload=e.model_dump(mode="json"))
        for n, e in enumerate((registered, started), start=1)
    ]
    await store.append(Write.create(node, *events))
    return session


async def test_the_owner_types_in_the_terminal_others_are_refused_the_end_closes_it(
    bus: Bus, kernel: Kernel
) -> None:
    session = await _session_on(EventStore(bus), kernel)
    async with running_proxy(bus, terminal_key=TERMINAL_KEY) as (proxy, base):
        await proxy.sync()
        url = f"{base.replace('http', 'ws')}/apps/{session.id}/{TERMINAL}/"

        with pytest.raises(websockets.exceptions.InvalidStatus) as bobs:
            async with connect(f"{url}?token={token(session.id, TERMINAL, BOB)}"):
                pass
        assert bobs.value.response.status_code == 403

        alices = f"{url}?token={token(session.id, TERMINAL, ALICE)}&cols=90&rows=20"
        async with connect(alices) as ws:
            await ws.send("echo $((6*7)); stty size\n")
            await read_until(ws, b"42\r\n20 90\r\n")

            await session.write(SessionTerminated(reason="done", exit_code=0))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await read_until(ws, b"never")
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001
