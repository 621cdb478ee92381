"""Helpers for the node agent tests on the real Docker engine (image ``jetyard-busybox:latest``,
built by ``scripts/ensure-docker``): reach the engine, run an agent through its entry point,
end it abruptly, read what it reported, and remove the containers a test made.

Docker is required: without it these tests fail (CI installs it), they never skip.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiodocker
import pytest

from events.store import EventStore
from schemas.settings import NatsSettings
from services.node import app
from services.node.backend import owner_labels
from services.node.settings import AgentSettings
from tests.integration.node_support import facts

IMAGE = "jetyard-busybox:latest"
SLEEP = ("sleep", "600")


async def open_docker() -> aiodocker.Docker:
    """A client of the local engine, which must have the test image (else the test fails)."""
    client: aiodocker.Docker | None = None
    try:
        client = aiodocker.Docker()
        await asyncio.wait_for(client.version(), timeout=5)
        await client.images.inspect(IMAGE)
    except Exception as exc:
        if client is not None:
            await client.close()
        pytest.fail(
            f"the Docker tests need a Docker engine and the image {IMAGE} ({exc!r}): "
            "run scripts/ensure-docker",
            pytrace=False,
        )
    return client


async def remove_containers(docker: aiodocker.Docker, node_id: str, cluster_id: str = "") -> None:
    """Remove every container of this node (a test owns what it creates)."""
    labels = [f"{k}={v}" for k, v in owner_labels(cluster_id, node_id).items()]
    for container in await docker.containers.list(all=True, filters=json.dumps({"label": labels})):
        try:
            await container.delete(force=True)
        except aiodocker.DockerError as exc:
            if exc.status not in (404, 409):  # gone, or its removal already under way
                raise


def start_agent(
    settings: AgentSettings, nats: NatsSettings
) -> tuple[asyncio.Task[None], asyncio.Event]:
    """The agent as ``jetyard serve agent`` runs it (its node id resolved from its data dir)."""
    stopping = asyncio.Event()
    return asyncio.create_task(app.run(settings, nats, stopping)), stopping


async def kill(task: asyncio.Task[None]) -> None:
    """End the agent abruptly, as SIGKILL would: it stops nothing on its way out."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def started(store: EventStore, node_id: str, kernel_id: str) -> str | None:
    for name, payload in await facts(store, node_id):
        if name == "KernelStarted" and payload["kernel_id"] == kernel_id:
            return str(payload["container_id"])
    return None


async def reported(
    store: EventStore, node_id: str, name: str, kernel_id: str
) -> dict[str, Any] | None:
    for found, payload in await facts(store, node_id):
        if found == name and payload["kernel_id"] == kernel_id:
            return payload
    return None


async def gone(docker: aiodocker.Docker, container_id: str) -> bool:
    try:
        await docker.containers.get(container_id)
    except aiodocker.DockerError as exc:
        return exc.status == 404
    return False


async def running(docker: aiodocker.Docker, container_id: str) -> bool:
    return bool((await (await docker.containers.get(container_id)).show())["State"]["Running"])
