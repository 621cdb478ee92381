"""Waiting for an endpoint's replicas, and waking one scaled to zero.

``Changes`` lets requests held at an endpoint with no serving replica wait for the route fold
to move (the proxy's service pulses it after each poll that applied events); they look again
each time. ``Waker`` sends ``WakeEndpoint`` (``cmd.endpoint.wake``, as the app proxy) for an
endpoint whose desired count is 0: once per proxy while it wakes, again only when a replica
has served since or ``cold_start_timeout_s`` passed without one (a wake that was lost), so a
burst of held requests is one command, not one each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from commands.bus import CommandBus
from commands.serving.messages import WakeEndpoint
from schemas.principal import Actor, Tenant
from services.appproxy.endpoints.table import Endpoint

log = logging.getLogger(__name__)


class Changes:
    """A pulse for waiters: ``pulse()`` wakes every ``wait()`` under way."""

    def __init__(self) -> None:
        self._moved = asyncio.Event()

    def pulse(self) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    async def wait(self, timeout: float) -> None:
        """Return at the next pulse, or after ``timeout`` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._moved.wait()


class Waker:
    def __init__(self, commands: CommandBus, actor: Actor) -> None:
        self._commands = commands
        self._actor = actor
        self._sent: dict[str, float] = {}
        """Endpoint id -> when (loop time) its last wake was sent, until a replica serves."""
        self._sending: set[asyncio.Task[None]] = set()
        self.sent = 0
        """Wake commands sent since start."""

    def wake(self, endpoint: Endpoint, now: float) -> None:
        """Send a wake for ``endpoint`` (desired 0, none serving) unless one is under way."""
        last = self._sent.get(endpoint.id)
        if last is not None and now - last < endpoint.cold_start_timeout_s:
            return
        self._sent[endpoint.id] = now
        owner = endpoint.owner
        command = WakeEndpoint(
            endpoint_id=endpoint.id, actor=self._actor,
            tenant=Tenant(domain=owner.domain, project=owner.project_id),
        )  # fmt: skip
        task = asyncio.create_task(self._send(command), name=f"appproxy:wake:{endpoint.name}")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    def served(self, endpoint_id: str) -> None:
        """A replica of the endpoint serves: a later scale to zero may be woken again."""
        self._sent.pop(endpoint_id, None)

    async def _send(self, command: WakeEndpoint) -> None:
        try:
            await self._commands.send(command)
            self.sent += 1
            log.info("appproxy: woke endpoint %s (command %s)", command.endpoint_id,
                     command.command_id)  # fmt: skip
        except Exception as exc:  # held requests time out; the next one after that wakes again
            log.warning("appproxy: could not wake endpoint %s: %r", command.endpoint_id, exc)

    async def stop(self) -> None:
        for task in list(self._sending):
            task.cancel()
        await asyncio.gather(*self._sending, return_exceptions=True)
