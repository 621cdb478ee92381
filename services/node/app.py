"""Agent entry point: resolve the node id, connect, declare streams, pick the backend, run the
agent until stopped. Reads and writes what ``services.node.agent`` does, and
``<data dir>/node.id`` (``services.node.identity``). Serves ``/metrics`` on
``JETYARD_AGENT_METRICS_PORT`` when set (``services.node.metrics``)."""

from __future__ import annotations

import asyncio
import logging

from events.bus import connect, ensure_streams
from httpserver.metrics import metrics_listener
from schemas.settings import NatsSettings
from services.node.agent import NodeAgent
from services.node.backend import Backend, BackendUnavailableError
from services.node.backend_docker import DockerBackend
from services.node.backend_simulated import SimulatedBackend
from services.node.identity import resolve_node_id
from services.node.metrics import agent_metrics
from services.node.settings import AgentSettings
from services.node.terminal import serving

log = logging.getLogger(__name__)


async def open_backend(settings: AgentSettings, node_id: str) -> Backend:
    """The configured backend for node ``node_id``; ``auto`` falls back to simulated when
    Docker does not answer, and says so loudly (nothing would really run)."""
    if settings.backend == "simulated":
        return _simulated(settings, node_id)
    try:
        return await DockerBackend.connect(
            node_id,
            cluster_id=settings.cluster_id,
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
        return _simulated(settings, node_id)


def _simulated(settings: AgentSettings, node_id: str) -> SimulatedBackend:
    return SimulatedBackend(
        node_id,
        settings.simulated_images,
        cluster_id=settings.cluster_id,
        mps_pipe_dir=settings.mps_pipe_dir,
        pull_seconds=settings.simulated_pull_seconds,
        pull_bytes=settings.simulated_pull_bytes,
        pull_failures=settings.simulated_pull_failures,
    )


async def run(
    agent_settings: AgentSettings, nats_settings: NatsSettings, stop: asyncio.Event
) -> None:
    # First: an unreadable node.id stops the agent before it connects or touches a container.
    node_id = await asyncio.to_thread(resolve_node_id, agent_settings)
    log.info("agent %s: node id %s", agent_settings.hostname, node_id)
    bus = await connect(nats_settings, name=f"agent {agent_settings.hostname}")
    try:
        await ensure_streams(bus)
        backend = await open_backend(agent_settings, node_id)
        try:
            async with serving(backend, agent_settings) as terminal_url:
                agent = NodeAgent(bus, agent_settings, backend, terminal_url=terminal_url)
                host, port = agent_settings.metrics_host, agent_settings.metrics_port
                async with metrics_listener(agent_metrics(agent), host, port, "agent"):
                    await agent.run(stop)
        finally:
            await backend.close()
    finally:
        await bus.close()
