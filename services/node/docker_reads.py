"""What the agent reads about one container from the Docker engine (aiodocker): its image's
labels and its address (for ``services.node.service_ports``), and the CPU time it used (for
``services.node.activity``). A container gone meanwhile answers as having none. No subjects."""

from __future__ import annotations

from collections.abc import Mapping

import aiodocker


async def image_labels(docker: aiodocker.Docker, container_id: str) -> Mapping[str, str]:
    try:
        container = await docker.containers.get(container_id)
        image = await docker.images.inspect(str(container["Image"]))
    except aiodocker.DockerError as exc:
        if exc.status != 404:
            raise
        return {}
    return dict(image.get("Config", {}).get("Labels") or {})


async def address_of(docker: aiodocker.Docker, container_id: str) -> str | None:
    """The container's IP on its network (its session's, else Docker's default bridge)."""
    try:
        container = await docker.containers.get(container_id)
    except aiodocker.DockerError as exc:
        if exc.status != 404:
            raise
        return None
    networks = container["NetworkSettings"].get("Networks") or {}
    mode = container["HostConfig"].get("NetworkMode", "")
    chosen: dict[str, str] = networks.get(mode) or next(iter(networks.values()), {})
    return chosen.get("IPAddress") or None


async def cpu_seconds(docker: aiodocker.Docker, container_id: str) -> float | None:
    # One sample, at once (``one-shot``: the engine does not wait a second for a second
    # sample to fill ``precpu_stats``, which the caller's own diff makes unneeded).
    try:
        stats = await docker._query_json(
            f"containers/{container_id}/stats", params={"stream": "0", "one-shot": "1"}
        )
    except aiodocker.DockerError as exc:
        if exc.status != 404:
            raise
        return None
    usage = (stats.get("cpu_stats") or {}).get("cpu_usage") or {}
    total = usage.get("total_usage")
    return total / 1e9 if isinstance(total, int) and total > 0 else None
