"""Carrying out one reconcile plan (``services.node.plan``) on this machine's backend: start
what it says (with what only this machine knows: device memory, NUMA CPUs, volume paths), stop,
keep the ended kernels' output and logs, report the facts on ``ev.agent.<node id>`` (through
``AgentRecord``), and remove containers once their end is on the log. Writes ``jy-logs``
objects, ``JY_OUTPUT`` (through ``OutputPublisher``) and ``ev.agent.<node id>``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TypeVar

from commands.node.rules import Allocation
from schemas.resources import ResourceSlots
from services.node.backend import Backend, Container, KernelSpec, StartFailedError
from services.node.capacity import Capacity, discover, simulated_capacity
from services.node.images import AgentImages
from services.node.logs import LogArchive
from services.node.mounts import host_mounts
from services.node.output import OutputPublisher
from services.node.plan import Plan, Report
from services.node.record import AgentRecord, Fact, FailedToStart, ImagesNow, Started
from services.node.settings import AgentSettings

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
PARALLEL = 8  # backend calls in flight per pass (create, stop, remove)


class PlanActions:
    """What a pass does about its plan. ``again`` asks for another pass (the agent's wake-up)."""

    def __init__(
        self,
        node_id: str,
        backend: Backend,
        settings: AgentSettings,
        record: AgentRecord,
        output: OutputPublisher,
        *,
        clock: Callable[[], datetime],
        again: Callable[[], None],
    ) -> None:
        self.node_id = node_id
        self.settings = settings
        self._backend = backend
        self._record = record
        self._output = output
        self._clock = clock
        self._again = again
        self.capacity = Capacity(slots=ResourceSlots())
        self.archive: LogArchive | None = None
        """Opened by the agent's start."""
        self.images_due = False
        """Report the images with the next facts (set by the agent's resync)."""
        self.images: AgentImages | None = None
        """Pulls images from registries (set by the agent; without it, a kernel runs only
        from an image the machine holds)."""

    async def discover(self) -> None:
        """What this machine has (simulated: what the settings say)."""
        settings = self.settings
        if self._backend.name == "simulated":
            self.capacity = simulated_capacity(
                self.node_id, settings.simulated_gpus, settings.cpu, settings.memory_bytes
            )
        else:
            self.capacity = await asyncio.to_thread(
                discover, cpu=settings.cpu, memory_bytes=settings.memory_bytes
            )

    async def act(self, todo: Plan) -> None:
        facts: list[Fact] = [f for f in await _each(self.start, todo.start) if f is not None]
        for started in facts:  # just started here: nothing of their output is published yet
            if isinstance(started, Started):
                self._output.follow(_running(started), fresh=True)
        attached = [Started(c.kernel_id, c.session_id, c.container_id) for c in todo.attach]
        for started in attached:
            self._output.follow(_running(started))
        facts += attached
        await _each(self.stop, todo.stop)
        # Its last lines reach JY_OUTPUT before its exit is reported: a reader that sees the
        # session end has seen all of its output.
        await _each(
            self._output.finish,
            [e.container for e in todo.ended if e.keep_logs and e.container is not None],
        )
        for ended in todo.ended:
            if ended.keep_logs and ended.container is not None:
                assert self.archive is not None, "acting after start"
                text = await self._backend.logs(
                    ended.container.container_id, self.settings.max_log_bytes
                )
                await self.archive.save(ended.kernel_id, text)
        facts += [e for e in todo.ended if e.report is not Report.NOTHING]
        if self.images_due:
            self.images_due = False
            facts.append(ImagesNow(tuple(await self._backend.images())))
        if facts:
            await self._record.report(facts, self._clock())
        # Removed only once their end is on the log (and their logs are kept).
        leftovers = [e.container for e in todo.ended if e.container is not None]
        await _each(self.remove, [*leftovers, *todo.remove])
        self._record.forget(todo.forget)
        if self.images is not None:
            self.images.settle()
        if todo.stop:
            self._again()  # report their exits next pass, even if no event comes

    def kernel_spec(
        self, kernel_id: str, allocation: Allocation, image: str | None = None
    ) -> KernelSpec:
        """What to run: the allocation, with what only this machine knows about it (its
        devices' memory, the CPUs of its NUMA node, where its folders' volumes are).
        Raises ``StartFailedError`` when a folder's volume is not on this node."""
        memory = {d.uuid: d.memory_bytes for d in self.capacity.devices}
        return KernelSpec(
            kernel_id=kernel_id,
            session_id=allocation.session_id,
            image=allocation.image if image is None else image,
            command=allocation.command,
            env=dict(allocation.env),
            slots=allocation.slots,
            devices=allocation.devices,
            device_memory_bytes={
                d.uuid: memory[d.uuid] for d in allocation.devices if d.uuid in memory
            },
            hostname=allocation.hostname,
            cpuset=self.capacity.cpus_of(allocation.numa_node),
            mounts=host_mounts(allocation.mounts, self.settings.volumes),
            sandbox=allocation.sandbox,
            cluster=allocation.cluster,
        )

    async def start(self, item: tuple[str, Allocation]) -> Fact | None:
        """Start a kernel: its fact, or None while its image is being pulled."""
        kernel_id, allocation = item
        image: str | None = allocation.image
        if self.images is not None:
            ready = await self.images.ready(kernel_id, allocation)
            if ready is None or isinstance(ready, FailedToStart):
                return ready
            image = ready
        try:
            spec = self.kernel_spec(kernel_id, allocation, image)
            container_id = await self._backend.start(spec)
        except StartFailedError as exc:
            log.warning("agent %s: kernel %s failed to start: %s", self.node_id, kernel_id, exc)
            return FailedToStart(kernel_id, allocation.session_id, str(exc))
        if self.images is not None:
            self.images.started(kernel_id)
        return Started(kernel_id, allocation.session_id, container_id)

    async def stop(self, container: Container) -> None:
        await self._backend.stop(container.container_id, self.settings.stop_timeout_s)

    async def remove(self, container: Container) -> None:
        await self._backend.remove(container.container_id)

    async def stop_all(self, containers: Sequence[Container]) -> None:
        await _each(self.stop, containers)


def _running(started: Started) -> Container:
    return Container(started.kernel_id, started.session_id, started.container_id, "running")


async def _each(fn: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R]:
    """``fn`` over ``items``, at most ``PARALLEL`` at a time, results in order."""
    limit = asyncio.Semaphore(PARALLEL)

    async def one(item: T) -> R:
        async with limit:
            return await fn(item)

    return list(await asyncio.gather(*(one(i) for i in items)))
