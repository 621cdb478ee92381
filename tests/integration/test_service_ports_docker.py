"""Service ports on the real Docker engine: an image built here from ``jetyard-busybox:latest``
(offline: a Dockerfile FROM a local image) declares a web app served by busybox ``httpd`` and a
TCP app nothing serves; once its kernel runs, the agent reads the image's label, reaches the
web app at the container's address and reports it open, and the other never-opened.
Docker is required: without it these tests fail (CI installs it), they never skip.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiodocker
import pytest

from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id
from schemas.service_ports import BACKENDAI_LABEL
from schemas.settings import NatsSettings
from services.node.identity import resolve_node_id
from services.node.settings import AgentSettings
from tests.integration.docker_support import (
    IMAGE,
    open_docker,
    remove_containers,
    reported,
    start_agent,
)
from tests.integration.node_support import allocate, change_ledger, eventually, stop

LABEL = "web:http:8080,db:tcp:5432"


@pytest.fixture(scope="module")
async def docker() -> AsyncIterator[aiodocker.Docker]:
    client = await open_docker()
    yield client
    await client.close()


@pytest.fixture(scope="module")
async def web_image(
    docker: aiodocker.Docker, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[str]:
    """A tiny image with the label and an HTTP server on 8080 (removed afterwards)."""
    tag = f"jetyard-test-ports:{new_id()[:12]}"
    context = tmp_path_factory.mktemp("web-image")
    (context / "index.html").write_text("hello\n")
    (context / "Dockerfile").write_text(
        f"FROM {IMAGE}\n"
        f'LABEL {BACKENDAI_LABEL}="{LABEL}"\n'
        "COPY index.html /www/index.html\n"
        'CMD ["httpd", "-f", "-p", "8080", "-h", "/www"]\n'
    )
    await _run("docker", "build", "--quiet", "--tag", tag, str(context))
    yield tag
    await docker.images.delete(tag, force=True)


async def _run(*argv: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, output.decode()


@pytest.fixture
async def machine(docker: aiodocker.Docker, tmp_path: Path) -> AsyncIterator[AgentSettings]:
    settings = AgentSettings(
        hostname=f"dock-{new_id()}", cluster_id=f"c{new_id()[:8]}", backend="docker",
        stop_timeout_s=2, data_dir=tmp_path / "agent", service_ports_wait_s=3.0,
    )  # fmt: skip
    yield settings
    await remove_containers(docker, resolve_node_id(settings), settings.cluster_id)


async def test_the_web_app_is_reported_open_and_the_silent_one_never_opened(
    bus: Bus,
    nats_settings: NatsSettings,
    docker: aiodocker.Docker,
    web_image: str,
    machine: AgentSettings,
) -> None:
    store = EventStore(bus)
    node_id, kernel = resolve_node_id(machine), new_id()
    task, stopping = start_agent(machine, nats_settings)
    try:
        await change_ledger(store, node_id, allocate(kernel, image=web_image))
        found: dict[str, Any] = await eventually(
            lambda: reported(store, node_id, "KernelServicePortsReported", kernel),
            timeout=30,
            what="the ports reported",
        )
        started = await reported(store, node_id, "KernelStarted", kernel)
        assert started is not None
        shown = await (await docker.containers.get(started["container_id"])).show()
        ip = shown["NetworkSettings"]["Networks"]["bridge"]["IPAddress"]

        assert [(p["name"], p["protocol"], p["port"], p["state"]) for p in found["ports"]] == [
            ("web", "http", 8080, "open"),
            ("db", "tcp", 5432, "never-opened"),
        ]
        assert [p["address"] for p in found["ports"]] == [f"{ip}:8080", f"{ip}:5432"]
        reader, writer = await asyncio.open_connection(ip, 8080)  # what the proxy will do
        writer.write(b"GET /index.html HTTP/1.0\r\n\r\n")
        assert (await reader.read()).endswith(b"hello\n")
        writer.close()

        await change_ledger(store, node_id, stop(kernel))
        await eventually(lambda: reported(store, node_id, "KernelExited", kernel), timeout=30)
    finally:
        stopping.set()
        await task
