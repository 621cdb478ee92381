"""The simulated backend: kernels that "run" in memory, no containers. Reads and writes no
subjects.

For scale tests (thousands of agents in one process) and machines without Docker. A kernel's
command decides what it does:

- ``("exit", "<code>")``: it exits with that code right after it starts;
- ``("sleep", "<seconds>")``: it runs that long, then exits with 0;
- ``("print", "<n>", "<seconds>")``: it prints ``line 1`` … ``line <n>`` evenly over that many
  seconds (a timer every 50 ms prints what is due), then exits with 0;
- anything else (or no command): it runs until stopped.

A kernel uses no CPU unless a test says how many CPUs it keeps busy (``set_cpu_load``).

Stopping a running kernel ends it with 143 (SIGTERM, as Docker with ``Init`` reports it). An
image that is not in the configured set fails to start, as it would on Docker. No thread or task
per kernel: timed exits are loop timers, so a process holds many agents cheaply. The state lives
in this object, so an agent restarted with the same backend object re-attaches its kernels, the
way a restarted agent finds its containers on a real machine.

Each kernel keeps what it would have run with on Docker (``launch_of``): the container
configuration ``services.node.docker_config`` builds, devices, environment and folder mounts
included, so tests without GPUs can see exactly what a GPU node would have been told. A kernel
whose folder directories are missing fails to start, as it would on Docker.

Service ports (``services.node.service_ports``): an image's labels are given per image
(``image_labels``); a kernel's address is its container name, and every port opens at once
except those in ``closed_ports``, which never do.
"""

from __future__ import annotations

import asyncio
import bisect
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from schemas.images import PullCause
from services.node.backend import (
    Container,
    KernelSpec,
    OutputLine,
    StartFailedError,
    container_name,
    last_bytes,
)
from services.node.docker_config import container_config
from services.node.image_budget import ImageInUseError, LocalImage
from services.node.mounts import check_host_mounts
from services.node.pulls import ProgressCallback, RegistryAuth
from services.node.simulated_kernel import Launch, SimulatedKernel, behaviour, print_plan
from services.node.simulated_pull import simulated_digest, simulated_pull

SIMULATED_STOP_TIMEOUT_S = 10.0

SIGTERM_EXIT = 143
PRINT_TICK_S = 0.05


class SimulatedBackend:
    def __init__(
        self,
        node_id: str,
        images: Iterable[str],
        *,
        cluster_id: str = "",
        mps_pipe_dir: Path | None = None,
        image_labels: Mapping[str, Mapping[str, str]] | None = None,
        closed_ports: Iterable[int] = (),
        pull_seconds: float = 0.5,
        pull_bytes: int = 100 * 2**20,
        pull_failures: Mapping[str, PullCause] | None = None,
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self._images = set(images)
        # Service ports: an image's labels, and the container ports that never open.
        self._image_labels = dict(image_labels or {})
        self._closed_ports = frozenset(closed_ports)
        self._mps_pipe_dir = mps_pipe_dir
        self._kernels: dict[str, SimulatedKernel] = {}  # by container id
        self._names: dict[str, str] = {}  # kernel id -> container id (the unique "name")
        self._listeners: list[Callable[[], None]] = []
        # Pulls: how long one takes, how big the image is, and the refs that fail (and why).
        self._pull = (pull_seconds, pull_bytes, dict(pull_failures or {}))
        self._pulled_at: dict[str, datetime] = {}

    @property
    def name(self) -> str:
        return "simulated"

    async def images(self) -> list[str]:
        return sorted(self._images)

    async def has_image(self, ref: str) -> bool:
        return ref in self._images

    async def pull(self, ref: str, auth: RegistryAuth | None, progress: ProgressCallback) -> str:
        seconds, size, failures = self._pull
        digest = await simulated_pull(
            ref, auth, progress, total_bytes=size, seconds=seconds, fail=failures
        )
        self._images.add(ref)
        self._pulled_at[ref] = datetime.now(UTC)
        return digest

    async def local_images(self) -> list[LocalImage]:
        size, epoch = self._pull[1], datetime.fromtimestamp(0, UTC)
        return [
            LocalImage(
                image_id=simulated_digest(ref), refs=(ref,), size_bytes=size,
                repo_digests=(), created=self._pulled_at.get(ref, epoch),
                last_used=self._pulled_at.get(ref, epoch),
            )
            for ref in sorted(self._images)
        ]  # fmt: skip

    async def remove_image(self, ref: str) -> int:
        if ref not in self._images:
            return 0
        if any(k.spec.image == ref and k.status != "exited" for k in self._kernels.values()):
            raise ImageInUseError(f"image {ref} is used by a container")
        self._images.discard(ref)
        return self._pull[1]

    async def containers(self) -> list[Container]:
        return [
            Container(
                kernel_id=k.spec.kernel_id,
                session_id=k.spec.session_id,
                container_id=k.container_id,
                status=k.status,
                exit_code=k.exit_code,
            )
            for k in self._kernels.values()
        ]

    async def start(self, spec: KernelSpec) -> str:
        existing = self._names.get(spec.kernel_id)
        if existing is not None:
            return existing
        if spec.image not in self._images:
            raise StartFailedError(f"image {spec.image!r} is not present on this node")
        check_host_mounts(spec.mounts)  # its folders must be there, as Docker needs them
        command = spec.command or ()
        delay, code = behaviour(command)
        printing = print_plan(command)
        config = container_config(
            spec,
            self.node_id,
            cluster_id=self.cluster_id,
            stop_timeout_s=SIMULATED_STOP_TIMEOUT_S,
            mps_pipe_dir=self._mps_pipe_dir,
        )
        kernel = SimulatedKernel(
            spec=spec, container_id=f"sim-{uuid.uuid4().hex}", launch=Launch(spec, config)
        )
        kernel.print(f"simulated kernel {spec.kernel_id}: {' '.join(command)}")
        self._kernels[kernel.container_id] = kernel
        self._names[spec.kernel_id] = kernel.container_id
        if delay is not None:
            # Exits after start() returns, as a real process would: the agent reports the start
            # first and then sees the exit through ``watch``.
            loop = asyncio.get_running_loop()
            kernel.timer = loop.call_later(delay, self._exit, kernel.container_id, code)
        elif printing is not None:
            start = asyncio.get_running_loop().time()
            self._print_due(kernel.container_id, start, *printing)
        return kernel.container_id

    def _print_due(self, container_id: str, start: float, lines: int, seconds: float) -> None:
        kernel = self._kernels.get(container_id)
        if kernel is None or kernel.status != "running":
            return
        loop = asyncio.get_running_loop()
        elapsed = loop.time() - start
        due = lines if elapsed >= seconds else int(lines * elapsed / seconds)
        while kernel.printed < due:
            kernel.printed += 1
            kernel.print(f"line {kernel.printed}")
        if kernel.printed >= lines:
            self._exit(container_id, 0)
        else:
            kernel.timer = loop.call_later(
                PRINT_TICK_S, self._print_due, container_id, start, lines, seconds
            )

    async def image_labels(self, container_id: str) -> Mapping[str, str]:
        kernel = self._kernels.get(container_id)
        return self._image_labels.get(kernel.spec.image, {}) if kernel is not None else {}

    async def address_of(self, container_id: str) -> str | None:
        kernel = self._kernels.get(container_id)
        return container_name(kernel.spec.kernel_id) if kernel is not None else None

    async def port_open(self, host: str, port: int) -> bool:
        return port not in self._closed_ports

    def launch_of(self, kernel_id: str) -> Launch | None:
        """What this kernel's container was started with (None once it is removed)."""
        container_id = self._names.get(kernel_id)
        kernel = self._kernels.get(container_id) if container_id is not None else None
        return kernel.launch if kernel is not None else None

    def say(self, kernel_id: str, text: str) -> None:
        """A line in a running kernel's output, as its process would write it."""
        kernel = self._kernels.get(self._names.get(kernel_id, ""))
        if kernel is None or kernel.status != "running":
            raise KeyError(f"kernel {kernel_id} does not run here")
        kernel.print(text)

    def set_cpu_load(self, kernel_id: str, cpus: float) -> None:
        """From now on the kernel keeps ``cpus`` CPUs busy (what ``cpu_seconds`` counts)."""
        container_id = self._names.get(kernel_id)
        kernel = self._kernels.get(container_id) if container_id is not None else None
        if kernel is not None:
            kernel.cpu_used_s, kernel.cpu_since = kernel.cpu_seconds(), time.monotonic()
            kernel.cpu_load = cpus

    async def cpu_seconds(self, container_id: str) -> float | None:
        kernel = self._kernels.get(container_id)
        if kernel is None or kernel.status != "running":
            return None
        return kernel.cpu_seconds()

    def exit_kernel(self, kernel_id: str, exit_code: int) -> None:
        """Make a running kernel exit on its own (a crash, a finished job), as tests need."""
        container_id = self._names.get(kernel_id)
        if container_id is not None:
            self._exit(container_id, exit_code)

    def _exit(self, container_id: str, exit_code: int) -> None:
        kernel = self._kernels.get(container_id)
        if kernel is None or kernel.status != "running":
            return
        if kernel.timer is not None:
            kernel.timer.cancel()
        kernel.status, kernel.exit_code, kernel.timer = "exited", exit_code, None
        kernel.print(f"exited with code {exit_code}")
        for changed in list(self._listeners):
            changed()

    async def stop(self, container_id: str, timeout_s: float) -> None:
        self._exit(container_id, SIGTERM_EXIT)

    async def logs(self, container_id: str, max_bytes: int) -> str:
        kernel = self._kernels.get(container_id)
        text = "".join(f"{line.text}\n" for line in kernel.log) if kernel is not None else ""
        return last_bytes(text, max_bytes)

    async def follow(self, container_id: str, since_ns: int) -> AsyncGenerator[OutputLine, None]:
        kernel = self._kernels.get(container_id)
        if kernel is None:
            return
        at = bisect.bisect_left(kernel.log, since_ns, key=lambda line: line.at_ns)
        while True:
            while at < len(kernel.log):
                yield kernel.log[at]
                at += 1
            if kernel.status != "running" or self._kernels.get(container_id) is not kernel:
                return
            await kernel.grew.wait()

    async def remove(self, container_id: str) -> None:
        kernel = self._kernels.pop(container_id, None)
        if kernel is None:
            return
        if kernel.timer is not None:
            kernel.timer.cancel()
        self._names.pop(kernel.spec.kernel_id, None)
        kernel.wake()  # its followers end

    async def watch(self, changed: Callable[[], None]) -> None:
        self._listeners.append(changed)
        try:
            changed()
            await asyncio.Future()  # exits call the listeners directly; wait to be cancelled
        finally:
            self._listeners.remove(changed)

    async def close(self) -> None:
        pass  # the simulated machine outlives its agents, like a real one
