"""The Docker backend (aiodocker): one container per kernel, found by label. Reads and writes no
subjects; talks only to the local Docker engine.

Containers are named ``jy-<kernel id>`` and labelled with the installation (cluster id), the
node, the kernel and the session, so a restarted agent re-attaches by listing labels, and a
second create of the same kernel collides (409) instead of running it twice. Only containers
with both this agent's cluster and node labels are listed and watched: another installation's
or another agent's on the same engine are never seen. Images are pulled only when the agent
asks (``pull``, ``services.node.docker_pull``): a start never pulls, and a missing image fails
it. What a container is made with is ``services.node.docker_config`` (pure,
tested on its own); a cluster session's network, made before its first kernel's container and
removed after its last, is ``services.node.networks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import AsyncGenerator, Callable, Mapping
from pathlib import Path

import aiodocker
import aiohttp
from aiodocker.containers import DockerContainer

from services.node import docker_reads
from services.node.backend import (
    LABEL_KERNEL,
    LABEL_SESSION,
    BackendUnavailableError,
    Container,
    ContainerStatus,
    KernelSpec,
    OutputLine,
    StartFailedError,
    container_name,
    last_bytes,
    owner_labels,
)
from services.node.docker_config import container_config
from services.node.docker_pull import docker_pull, local_images, remove_image
from services.node.image_budget import LocalImage
from services.node.mounts import check_host_mounts
from services.node.networks import SessionNetworks
from services.node.output_lines import stamped_lines
from services.node.pulls import ProgressCallback, RegistryAuth
from services.node.service_ports import tcp_open

log = logging.getLogger(__name__)

_STATUS: dict[str, ContainerStatus] = {
    "created": "created",
    "running": "running",
    "paused": "running",
    "restarting": "running",
    "exited": "exited",
    "dead": "exited",
    "removing": "exited",
}


class DockerBackend:
    def __init__(
        self,
        docker: aiodocker.Docker,
        node_id: str,
        *,
        cluster_id: str = "",
        stop_timeout_s: float,
        mps_pipe_dir: Path | None = None,
    ) -> None:
        self._docker = docker
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._stop_timeout_s = stop_timeout_s
        self._mps_pipe_dir = mps_pipe_dir
        self.networks = SessionNetworks(docker, node_id, cluster_id)

    @classmethod
    async def connect(
        cls,
        node_id: str,
        *,
        cluster_id: str = "",
        url: str | None = None,
        stop_timeout_s: float = 10.0,
        mps_pipe_dir: Path | None = None,
    ) -> DockerBackend:
        """Reach the engine (raises ``BackendUnavailableError`` with the reason if it does not
        answer within a few seconds)."""
        docker: aiodocker.Docker | None = None
        try:
            docker = aiodocker.Docker(url=url)
            await asyncio.wait_for(docker.version(), timeout=5.0)
        except (Exception, TimeoutError) as exc:
            if docker is not None:
                await docker.close()
            raise BackendUnavailableError(f"Docker is not reachable: {exc!r}") from exc
        return cls(
            docker,
            node_id,
            cluster_id=cluster_id,
            stop_timeout_s=stop_timeout_s,
            mps_pipe_dir=mps_pipe_dir,
        )

    @property
    def name(self) -> str:
        return "docker"

    @property
    def docker(self) -> aiodocker.Docker:
        """The engine's client (the kernels' terminals exec through it: ``terminal.py``)."""
        return self._docker

    async def images(self) -> list[str]:
        listed = await self._docker.images.list()
        tags = {tag for image in listed for tag in (image.get("RepoTags") or [])}
        tags.discard("<none>:<none>")
        return sorted(tags)

    async def has_image(self, ref: str) -> bool:
        try:
            await self._docker.images.inspect(ref)
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def pull(self, ref: str, auth: RegistryAuth | None, progress: ProgressCallback) -> str:
        return await docker_pull(self._docker, ref, auth, progress)

    async def local_images(self) -> list[LocalImage]:
        return await local_images(self._docker)

    async def remove_image(self, ref: str) -> int:
        return await remove_image(self._docker, ref)

    def _owned(self) -> list[str]:
        """Docker label filters (all must match): this node's containers of its installation."""
        return [f"{k}={v}" for k, v in owner_labels(self.cluster_id, self.node_id).items()]

    async def containers(self) -> list[Container]:
        filters = json.dumps({"label": self._owned()})
        listed = await self._docker.containers.list(all=True, filters=filters)
        found: list[Container] = []
        for entry in listed:
            labels: dict[str, str] = entry["Labels"] or {}
            status = _STATUS.get(str(entry["State"]))
            if status is None or LABEL_KERNEL not in labels:
                continue
            exit_code, oom = None, False
            if status == "exited":
                # The listing shows the exit code only inside a sentence; inspect for the number.
                try:
                    state = (await entry.show())["State"]
                except aiodocker.DockerError as exc:
                    if exc.status == 404:
                        continue  # removed meanwhile
                    raise
                exit_code, oom = int(state["ExitCode"]), bool(state.get("OOMKilled"))
            found.append(
                Container(
                    kernel_id=labels[LABEL_KERNEL],
                    session_id=labels.get(LABEL_SESSION, ""),
                    container_id=entry.id,
                    status=status,
                    exit_code=exit_code,
                    oom_killed=oom,
                )
            )
        return found

    async def start(self, spec: KernelSpec) -> str:
        if not spec.image:
            raise StartFailedError("the allocation names no image")
        await asyncio.to_thread(check_host_mounts, spec.mounts)
        name = container_name(spec.kernel_id)
        try:
            config = container_config(
                spec,
                self.node_id,
                cluster_id=self.cluster_id,
                stop_timeout_s=self._stop_timeout_s,
                mps_pipe_dir=self._mps_pipe_dir,
            )
            async with self.networks.joined(spec):  # a cluster kernel's session network
                container = await self._docker.containers.create(config, name=name)
        except aiodocker.DockerError as exc:
            if exc.status == 409:  # made before: by an earlier pass, or an agent that died
                container = await self._docker.containers.get(name)
                if container["State"]["Status"] != "created":
                    return container.id
            elif exc.status == 404:
                raise StartFailedError(
                    f"image {spec.image!r} is not present on this node ({exc.message})"
                ) from exc
            else:
                raise StartFailedError(
                    f"Docker refused to create the container: {exc.message}"
                ) from exc
        try:
            await container.start()
        except aiodocker.DockerError as exc:
            # Remove what was created: a failed kernel must leave nothing behind.
            with contextlib.suppress(aiodocker.DockerError):
                await container.delete(force=True)
            raise StartFailedError(f"Docker could not start the container: {exc.message}") from exc
        return container.id

    def _container(self, container_id: str) -> DockerContainer:
        return self._docker.containers.container(container_id)

    async def stop(self, container_id: str, timeout_s: float) -> None:
        try:
            await self._container(container_id).stop(t=math.ceil(timeout_s))
        except aiodocker.DockerError as exc:
            if exc.status not in (304, 404):  # already stopped, already gone
                raise

    # ---- service ports (``services.node.service_ports``) ----------------------------------

    async def image_labels(self, container_id: str) -> Mapping[str, str]:
        return await docker_reads.image_labels(self._docker, container_id)

    async def address_of(self, container_id: str) -> str | None:
        return await docker_reads.address_of(self._docker, container_id)

    async def port_open(self, host: str, port: int) -> bool:
        return await tcp_open(host, port)

    async def logs(self, container_id: str, max_bytes: int) -> str:
        try:
            lines = await self._container(container_id).log(stdout=True, stderr=True)
        except aiodocker.DockerError as exc:
            if exc.status == 404:
                return ""
            raise
        return last_bytes("".join(lines), max_bytes)

    async def follow(self, container_id: str, since_ns: int) -> AsyncGenerator[OutputLine, None]:
        # The engine reads "<seconds>.<nanoseconds>" and returns lines taken at that time or
        # later; the follower skips those it published already.
        seconds, nanos = divmod(since_ns, 1_000_000_000)
        chunks = self._container(container_id).log(
            stdout=True, stderr=True, follow=True, timestamps=True, since=f"{seconds}.{nanos:09d}"
        )
        try:
            async for line in stamped_lines(chunks):
                yield line
        except aiodocker.DockerError as exc:
            if exc.status != 404:  # gone: nothing more to read
                raise

    async def cpu_seconds(self, container_id: str) -> float | None:
        return await docker_reads.cpu_seconds(self._docker, container_id)

    async def remove(self, container_id: str) -> None:
        try:
            await self._container(container_id).delete(force=True)
        except aiodocker.DockerError as exc:
            if exc.status != 404:
                raise
        await self.networks.sweep()  # its session's network goes with its last container here

    async def watch(self, changed: Callable[[], None]) -> None:
        filters = json.dumps(
            {
                "type": ["container"],
                "label": self._owned(),
                "event": ["start", "die", "destroy"],
            }
        )
        while True:
            # aiodocker's events API has no annotations (hence the ignores below).
            subscriber = self._docker.events.subscribe(filters=filters)  # type: ignore[no-untyped-call]
            changed()  # whatever happened while not subscribed is found by listing
            with contextlib.suppress(aiodocker.DockerError, aiohttp.ClientError):
                await self.networks.sweep()  # left by an agent that died mid-removal
            while (event := await subscriber.get()) is not None:
                if event.get("Action") == "die":
                    await self._settled(str(event.get("id", "")))
                changed()
            # The stream ended (engine restarted, connection lost): subscribe again.
            with contextlib.suppress(Exception):
                await self._docker.events.stop()  # type: ignore[no-untyped-call]
            log.warning("Docker event stream ended; subscribing again")
            await asyncio.sleep(1.0)

    async def _settled(self, container_id: str) -> None:
        # The engine sends "die" before the container's state says so: a listing right after
        # the event still shows it running, and the exit would wait for the next resync.
        # Waiting for "not running" (milliseconds) makes the listing true.
        with contextlib.suppress(aiodocker.DockerError, aiohttp.ClientError, TimeoutError):
            await self._container(container_id).wait(timeout=10)

    async def close(self) -> None:
        with contextlib.suppress(aiohttp.ClientError, aiodocker.DockerError):
            await self._docker.close()
