"""Service ports of running kernels: the apps a kernel's image declares (its labels, read by
``schemas.service_ports``) are waited for once it runs, each up to a bound, and reported once
per kernel: ``KernelServicePortsReported`` on ``ev.agent.<node id>``, through the agent's record
(its only writer). Reads no subjects itself.

Level-triggered like the agent's passes: every ``interval_s`` each kernel running on the log with
no ports reported and no probe under way gets a probe, so a probe cut short by an agent restart
is made again by the next incarnation. A kernel whose image declares no apps writes nothing
(remembered in memory, not on the log). ``http`` and ``tcp`` apps are probed with a TCP connect
from the agent to the container's address (the agent runs on the host, which reaches the
containers' networks); ``pty`` and ``preopen`` ones open on demand and are reported unprobed.

An inference session's kernel also serves the app ``inference`` on the port its allocation
names (``service_port``), whatever its image declares: reported unprobed (a model may load for
minutes; the serving controller's health probes say when it answers).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from schemas.service_ports import (
    PortProtocol,
    PortState,
    ReportedPort,
    ServicePort,
    ServicePortError,
    service_ports_of,
)
from schemas.serving import INFERENCE_APP
from services.node.record import AgentRecord, PortsFound
from services.node.settings import AgentSettings

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0
RETRY_S = 0.5
LOOK_INTERVAL_S = 1.0


@runtime_checkable
class PortsBackend(Protocol):
    """What a backend offers for service ports (Docker and simulated; a backend without it
    reports none)."""

    async def image_labels(self, container_id: str) -> Mapping[str, str]:
        """The labels of the image the container runs (empty if it is gone)."""
        ...

    async def address_of(self, container_id: str) -> str | None:
        """The host or IP the agent reaches the container at (None: none, e.g. no network)."""
        ...

    async def port_open(self, host: str, port: int) -> bool:
        """Whether something accepts connections there now (one attempt, briefly)."""
        ...


def utc_now() -> datetime:
    return datetime.now(UTC)


async def tcp_open(host: str, port: int, timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """One TCP connect: open if it is accepted within ``timeout_s``."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


class ServicePortWatch:
    def __init__(
        self,
        backend: PortsBackend,
        record: AgentRecord,
        *,
        clock: Callable[[], datetime] = utc_now,
        open_within_s: float,
        retry_s: float = RETRY_S,
        interval_s: float = LOOK_INTERVAL_S,
        inference_port: Callable[[str], int | None] = lambda kernel_id: None,
    ) -> None:
        self._backend = backend
        self._inference_port = inference_port
        self._record = record
        self._clock = clock
        self.open_within_s = open_within_s
        self._retry_s = retry_s
        self._interval_s = interval_s
        self._probing: dict[str, asyncio.Task[None]] = {}
        self._no_apps: set[str] = set()

    async def run(self) -> None:
        """Look every ``interval_s`` until cancelled; cancelling ends the probes under way."""
        try:
            while True:
                self.look()
                await asyncio.sleep(self._interval_s)
        finally:
            probes = list(self._probing.values())
            for task in probes:
                task.cancel()
            await asyncio.gather(*probes, return_exceptions=True)

    def look(self) -> None:
        running = self._record.running
        self._no_apps &= running.keys()
        for kernel_id, kernel in running.items():
            if kernel.ports_reported or kernel_id in self._probing or kernel_id in self._no_apps:
                continue
            task = asyncio.create_task(self._probe(kernel_id, kernel.container_id))
            self._probing[kernel_id] = task
            task.add_done_callback(functools.partial(self._done, kernel_id))

    def _done(self, kernel_id: str, _: asyncio.Task[None]) -> None:
        self._probing.pop(kernel_id, None)

    async def _probe(self, kernel_id: str, container_id: str) -> None:
        try:
            await self._report(kernel_id, container_id)
        except Exception:
            # The engine or NATS failed: the next look probes this kernel afresh.
            log.exception("kernel %s: its service ports were not reported; again later", kernel_id)

    async def _report(self, kernel_id: str, container_id: str) -> None:
        try:
            apps = service_ports_of(await self._backend.image_labels(container_id))
        except ServicePortError as exc:
            # Registering refuses such a label; an image that reached the node without being
            # registered serves no apps rather than stop its kernel.
            log.warning("kernel %s: its image's service ports are unusable: %s", kernel_id, exc)
            apps = ()
        port = self._inference_port(kernel_id)
        if port is not None:
            served = ServicePort(name=INFERENCE_APP, protocol=PortProtocol.PREOPEN, ports=(port,))
            apps = (*(a for a in apps if a.name != INFERENCE_APP and port not in a.ports), served)
        if not apps:
            self._no_apps.add(kernel_id)
            return
        host = await self._backend.address_of(container_id)
        found = await asyncio.gather(*(self._wait(host, app) for app in apps))
        await self._record.report([PortsFound(kernel_id, tuple(found))], self._clock())

    async def _wait(self, host: str | None, app: ServicePort) -> ReportedPort:
        state = PortState.NOT_PROBED
        if app.protocol.probed:
            state = PortState.NEVER_OPENED
            if host is not None and await self._opens(host, app.port):
                state = PortState.OPEN
        address = f"{host}:{app.port}" if host is not None else ""
        return ReportedPort(
            name=app.name, protocol=app.protocol, port=app.port, address=address, state=state,
            public=app.public,
        )  # fmt: skip

    async def _opens(self, host: str, port: int) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.open_within_s
        while True:
            if await self._backend.port_open(host, port):
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(self._retry_s, left))


async def watch_service_ports(
    backend: object,
    record: AgentRecord,
    settings: AgentSettings,
    inference_port: Callable[[str], int | None] = lambda kernel_id: None,
) -> None:
    """The agent's loop for service ports (until cancelled); idle with a backend that has no
    labels to read. ``inference_port``: the port an inference kernel serves on, from its
    allocation."""
    if not isinstance(backend, PortsBackend):
        await asyncio.Event().wait()
        return
    watch = ServicePortWatch(
        backend, record, open_within_s=settings.service_ports_wait_s,
        inference_port=inference_port,
    )  # fmt: skip
    await watch.run()
