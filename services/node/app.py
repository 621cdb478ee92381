"""Agent entry point: connect, declare streams, pick the backend, run the agent until stopped.
Reads and writes what ``services.node.agent`` does."""

from __future__ import annotations

import asyncio
import logging

from events.bus import connect, ensure_streams
from schemas.settings import NatsSettings
from services.node.agent import NodeAgent
from services.node.backend import Backend, BackendUnavailableError
from services.node.backend_docker import DockerBackend
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings

log = logging.getLogger(__name__)


async def open_backend(settings: AgentSettings) -> Backend:
    """The configured backend; ``auto`` falls back to simulated when Docker does not answer,
    and says so loudly (nothing would really run)."""
    node_id = settings.node_id
    if settings.backend == "simulated":
        return SimulatedBackend(
            node_id, settings.simulated_images, mps_pipe_dir=settings.mps_pipe_dir
        )
    try:
        return await DockerBackend.connect(
            node_id,
            url=settings.docker_url,
            stop_timeout_s=settings.stop_timeout_s,
            mps_pipe_dir=settings.mps_pipe_dir,
        )
    except BackendUnavailableError as exc:
        if settings.backend == "docker":
            raise
        log.warning(
            "%s. USING THE SIMULATED BACKEND: kernels on %s will not really run "
            "(set JETYARD_AGENT_BACKEND=docker to insist on Docker)",
            exc,
            settings.hostname,
        )
        return SimulatedBackend(
            node_id, settings.simulated_images, mps_pipe_dir=settings.mps_pipe_dir
        )


async def run(
    agent_settings: AgentSettings, nats_settings: NatsSettings, stop: asyncio.Event
) -> None:
    bus = await connect(nats_settings, name=f"agent {agent_settings.hostname}")
    try:
        await ensure_streams(bus)
        backend = await open_backend(agent_settings)
        try:
            await NodeAgent(bus, agent_settings, backend).run(stop)
        finally:
            await backend.close()
    finally:
        await bus.close()
