"""For the terminal tests: a kernel's container on the real Docker engine with its agent's
terminal endpoint served, and a WebSocket client that types and reads until it sees text."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from websockets.asyncio.client import ClientConnection

from schemas.ids import new_id
from services.node.backend import KernelSpec
from services.node.backend_docker import DockerBackend
from services.node.settings import AgentSettings
from services.node.terminal import serving
from tests.integration.docker_support import IMAGE, SLEEP, open_docker, remove_containers

TERMINAL_KEY = "t" * 40


@dataclass(frozen=True)
class Kernel:
    id: str
    session_id: str
    terminal_url: str
    """The agent's terminal endpoint (``ws://host:port``)."""


@contextlib.asynccontextmanager
async def kernel_with_terminal(tmp_path: Path) -> AsyncIterator[Kernel]:
    """A running kernel container of a node of its own, and the node's terminal endpoint."""
    docker = await open_docker()
    node_id = f"term-{new_id()[:12]}"
    backend = DockerBackend(docker, node_id, stop_timeout_s=1)
    settings = AgentSettings(data_dir=tmp_path, terminal_key=TERMINAL_KEY)
    try:
        kernel = Kernel(new_id(), new_id(), "")
        await backend.start(KernelSpec(kernel.id, kernel.session_id, IMAGE, SLEEP))
        async with serving(backend, settings) as url:
            yield Kernel(kernel.id, kernel.session_id, url)
    finally:
        await remove_containers(docker, node_id)
        await docker.close()


async def read_until(ws: ClientConnection, needle: bytes, timeout_s: float = 15.0) -> bytes:
    """What the terminal printed up to and including ``needle``."""
    seen = b""
    async with asyncio.timeout(timeout_s):
        while needle not in seen:
            message = await ws.recv()
            seen += message if isinstance(message, bytes) else message.encode()
    return seen
