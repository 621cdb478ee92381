"""Live output on the real Docker engine: a running container's output is readable through
``sessionLogs`` before it exits, and an agent killed and started again in the middle resumes
from the engine's log timestamps without losing or repeating a line."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiodocker
import pytest

from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.settings import NatsSettings
from services.node.identity import resolve_node_id
from services.node.settings import AgentSettings
from tests.integration.docker_support import (
    IMAGE,
    kill,
    open_docker,
    remove_containers,
    running,
    start_agent,
    started,
)
from tests.integration.gateway_support import running_gateway
from tests.integration.node_support import eventually
from tests.integration.output_support import new_session, run_on

# Five lines, a pause until the test says go (after it has read them and restarted the agent:
# a fixed sleep was too short on a loaded machine), five more.
PRINT = (
    "sh",
    "-c",
    "i=0; while [ $i -lt 5 ]; do i=$((i+1)); echo out $i; done; "
    "while [ ! -e /tmp/go ]; do sleep 0.1; done; "
    "while [ $i -lt 10 ]; do i=$((i+1)); echo out $i >&2; done; sleep 600",
)
LOGS = "query($id: ID!) { sessionLogs(id: $id) }"


@pytest.fixture
async def docker() -> AsyncIterator[aiodocker.Docker]:
    client = await open_docker()
    yield client
    await client.close()


@pytest.fixture
async def machine(docker: aiodocker.Docker, tmp_path: Path) -> AsyncIterator[AgentSettings]:
    settings = AgentSettings(
        hostname=f"dock-{new_id()}",
        cluster_id=f"c{new_id()[:8]}",
        backend="docker",
        stop_timeout_s=2,
        data_dir=tmp_path / "agent",
    )
    yield settings
    await remove_containers(docker, resolve_node_id(settings), settings.cluster_id)


async def test_a_running_containers_output_is_readable_and_survives_an_agent_restart(
    bus: Bus,
    nats_settings: NatsSettings,
    docker: aiodocker.Docker,
    machine: AgentSettings,
    tmp_path: Path,
) -> None:
    store = EventStore(bus)
    node_id = resolve_node_id(machine)
    session_id, _ = await new_session(store)
    async with running_gateway(bus, tmp_path / "gateway") as gateway:

        async def logs(wanted: str) -> str | None:
            body = await gateway.gql(LOGS, id=session_id)
            text: str | None = body["data"]["sessionLogs"]
            return text if text is not None and wanted in text else None

        task, stopping = start_agent(machine, nats_settings)
        try:
            kernel = await run_on(store, session_id, node_id, IMAGE, PRINT)
            first = await eventually(lambda: logs("out 5\n"), timeout=20, what="the first lines")
            container_id = await started(store, node_id, kernel)
            assert container_id is not None and await running(docker, container_id)
            await kill(task)
            task, stopping = start_agent(machine, nats_settings)
            go = await docker.containers.container(container_id).exec(["touch", "/tmp/go"])
            async with go.start(detach=False) as stream:
                while await stream.read_out() is not None:
                    pass
            whole = await eventually(lambda: logs("out 10\n"), timeout=30, what="all lines")
            assert await running(docker, container_id)  # read before it exits
        finally:
            stopping.set()
            await task

    assert first == "".join(f"out {i}\n" for i in range(1, 6))
    assert whole == "".join(f"out {i}\n" for i in range(1, 11))
