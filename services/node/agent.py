"""The node agent: registers the machine, keeps its containers equal to its allocation ledger
(level-triggered), reports kernel facts, refreshes its heartbeat, publishes running kernels'
output live and keeps it once they end.

Reads ``ev.node.<node id>`` (its ledger, written by the scheduler) and ``ev.agent.<node id>``;
writes ``ev.agent.<node id>`` (only here), key ``agent.<node id>`` in ``jy-heartbeats``,
``output.<session id>.<kernel id>`` in ``JY_OUTPUT`` (``services.node.output``), objects in
``jy-logs``, and ``ev.activity.<node id>``: every ``activity_interval_s``, the kernels that
printed or used their CPUs or GPUs since the last time (``services.node.activity``; the
scheduler's idle timeout reads them).

A reconcile pass compares the ledger, the containers found by label and the facts already on
the log, and acts on the difference (``services.node.plan``, carried out by
``services.node.acting``). Passes run at start, after every ledger change, after every container
event, after a NATS reconnect, after a failed pass (with back-off), and every
``resync_interval_s`` in case an event was missed. Stopping the agent
leaves its containers running: the next incarnation re-attaches them.

The agent acts as its backend's node (``backend.node_id``; the entry point resolves it with
``services.node.identity``), so the id it reports under and the labels it finds its containers
by are one value.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime

import nats.errors

from events.bus import Bus
from events.cancelling import cancelling
from events.fold import Fold
from events.store import EventStore
from events.writes import OutcomeUnknownError, UnavailableError
from schemas.subjects import AggregateType, event_subject
from services.node.acting import PlanActions
from services.node.activity import AgentActivity
from services.node.backend import Backend
from services.node.capacity import Capacity
from services.node.credentials import RegistryCredentials
from services.node.heartbeat import Heartbeat
from services.node.images import AgentImages
from services.node.ledger import Ledger
from services.node.logs import LogArchive
from services.node.output import OutputPublisher
from services.node.output_positions import PositionFiles
from services.node.overlay import underlay_address
from services.node.plan import plan
from services.node.record import (
    AgentRecord,
    AgentSupersededError,
)
from services.node.service_ports import watch_service_ports
from services.node.settings import AgentSettings

log = logging.getLogger(__name__)


class NodeRemovedError(RuntimeError):
    """The node was removed from the cluster for good: its agent must not register or act."""

    for_good = True
    """``jetyard serve`` exits with ``STOPPED_FOR_GOOD`` for it, and ``jetyard up`` does not
    start the agent again."""


def utc_now() -> datetime:
    return datetime.now(UTC)


class NodeAgent:
    def __init__(
        self,
        bus: Bus,
        settings: AgentSettings,
        backend: Backend,
        *,
        clock: Callable[[], datetime] = utc_now,
        terminal_url: str = "",
    ) -> None:
        self.node_id = backend.node_id
        self.terminal_url = terminal_url
        self.settings = settings
        self._bus = bus
        self._backend = backend
        self._clock = clock
        bucket_interval = bus.settings.heartbeat_interval_s
        self.heartbeat_interval_s = settings.heartbeat_interval_s or bucket_interval
        if self.heartbeat_interval_s > bucket_interval:
            raise ValueError(
                f"heartbeat interval {self.heartbeat_interval_s}s is longer than the "
                f"{bucket_interval}s the bucket's TTL (3x) is made for: the node would be "
                "declared lost between refreshes"
            )
        store = EventStore(bus)
        self.record = AgentRecord(store, self.node_id)
        self._fold = Fold(
            bus,
            Ledger(),
            subjects=[
                event_subject(AggregateType.NODE, self.node_id),
                event_subject(AggregateType.AGENT, self.node_id),
            ],
            consumer=f"agent-{self.node_id}",
        )
        self._dirty = asyncio.Event()
        self._answered_loss = 0
        self._reconnects = 0
        self._archive: LogArchive | None = None
        self.activity = AgentActivity(
            store, backend, self.record, self._fold.state, interval_s=settings.activity_interval_s
        )
        self._output = OutputPublisher(
            bus,
            backend,
            self.activity.reports,
            # A file per node: agents of several nodes may share a data directory (a bench).
            PositionFiles(settings.data_dir / "output", name=self.node_id),
        )
        self.actions = PlanActions(
            self.node_id, backend, settings, self.record, self._output,
            clock=clock, again=self._dirty.set,
        )  # fmt: skip
        self.images = AgentImages(
            backend, self.record, settings,
            RegistryCredentials(bus, self.node_id, timeout_s=settings.credentials_timeout_s),
            again=self._dirty.set, in_use=self._images_in_use, clock=clock,
        )  # fmt: skip
        self.actions.images = self.images

    @property
    def capacity(self) -> Capacity:
        return self.actions.capacity

    @capacity.setter
    def capacity(self, capacity: Capacity) -> None:
        self.actions.capacity = capacity

    @property
    def ledger(self) -> Ledger:
        return self._fold.state

    @property
    def fold(self) -> Fold[Ledger]:
        """The fold of its ledger and its own record (its lag is a metric)."""
        return self._fold

    def _inference_port(self, kernel_id: str) -> int | None:
        held = self.ledger.allocations.get(kernel_id)
        return None if held is None else held.service_port

    async def run(self, stop: asyncio.Event) -> None:
        """Start, then work until ``stop`` is set (or this incarnation is superseded)."""
        loops: list[asyncio.Task[object]] = []
        try:
            heartbeat = await self._start_through_outages(stop)
            if heartbeat is None:
                return
            stopping: asyncio.Task[object] = asyncio.create_task(stop.wait())
            loops = [
                stopping,
                asyncio.create_task(self._reconcile_loop()),
                asyncio.create_task(self._follow()),
                asyncio.create_task(self._backend.watch(self._dirty.set)),
                asyncio.create_task(heartbeat.run(lambda: self.record.epoch, self._tick)),
                asyncio.create_task(self._resync()),
                asyncio.create_task(
                    watch_service_ports(
                        self._backend, self.record, self.settings, self._inference_port
                    )
                ),
                *map(asyncio.create_task, self.activity.loops(self._clock)),
            ]
            done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopping:
                    task.result()  # the other loops only end by failing: say why
        finally:
            for task in loops:
                task.cancel()
            await asyncio.gather(*loops, return_exceptions=True)
            await self.images.close()  # a pull cut short begins again with the next start
            await self._output.close()  # the next incarnation resumes where the log says
            await self.activity.close()
            await self._fold.close()

    async def _start_through_outages(self, stop: asyncio.Event) -> Heartbeat | None:
        """``start``, again after a pause while the log cannot answer (a leader election, a
        server away); None if ``stop`` is set first. Starting again is safe: it reads the
        ledger afresh, and a registration stored without an answer is superseded by the
        next one."""
        delay = 0.5
        while True:
            try:
                return await self.start()
            except (nats.errors.Error, TimeoutError, UnavailableError, OutcomeUnknownError) as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                log.warning("agent %s: start failed (%r); again in %.1fs", self.node_id, exc, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                return None
            delay = min(10.0, delay * 2)

    async def start(self) -> Heartbeat:
        """Discover, catch up with the ledger, fence, register, beat once."""
        settings = self.settings
        await self.actions.discover()
        self._reconnects = self._bus.nc.stats["reconnects"]
        self.actions.archive = await LogArchive.open(self._bus)
        heartbeat = await Heartbeat.open(
            self._bus, self.node_id, settings.hostname, self.heartbeat_interval_s, self._clock
        )
        await self.record.load()
        await self._fold.catch_up()
        self._check_not_removed()
        self._answered_loss = self.ledger.lost_seq  # this registration answers any loss so far
        await self._fence()
        epoch = await self._register()
        await self.images.interrupted(self._images_in_use())
        await heartbeat.beat(epoch)
        self._dirty.set()
        return heartbeat

    def _images_in_use(self) -> set[str]:
        """The image references the ledger's kernels here run (or wait to run) from."""
        return {
            a.source.reference if a.source is not None else a.image
            for a in self.ledger.allocations.values()
        }

    async def _register(self) -> int:
        epoch = await self.record.register(
            hostname=self.settings.hostname,
            backend=self._backend.name,
            capacity=self.capacity.slots,
            devices=self.capacity.devices,
            numa=self.capacity.numa,
            images=await self._backend.images(),
            now=self._clock(),
            resource_group=self.settings.resource_group,
            volumes=tuple(self.settings.volumes),  # names only: where they are stays here
            terminal_url=self.terminal_url,
            address=self.settings.address or underlay_address(self._bus.settings.url),
        )
        log.info(
            "agent %s (%s, %s backend) registered with epoch %d, capacity %s",
            self.node_id,
            self.settings.hostname,
            self._backend.name,
            epoch,
            self.capacity.slots,
        )
        return epoch

    def _check_not_removed(self) -> None:
        node = self.ledger.node
        if node is None or not node.removed:
            return
        said = (
            f"node {self.node_id} was removed from the cluster; not registering "
            "(join with a new data directory to come back as a new node)"
        )
        log.error("%s", said)
        raise NodeRemovedError(said)

    async def _fence(self) -> None:
        """End every running container whose allocation was released (while this agent was
        away or cut off) before registering again: a partition must not run a job twice.
        They end as a pass ends any kernel (logs kept, exit reported, container removed), so
        the node comes back with none of that work left. The scheduler has ended their
        sessions already (``node-lost``); the exits it reads change nothing there."""
        wanted = self.ledger.allocations
        doomed = [
            c
            for c in await self._backend.containers()
            if c.status == "running" and c.kernel_id not in wanted
        ]
        if not doomed:
            return
        log.warning(
            "agent %s: stopping %d container(s) whose allocation was released",
            self.node_id,
            len(doomed),
        )
        await self.actions.stop_all(doomed)
        fenced = {c.kernel_id for c in doomed}
        found = [c for c in await self._backend.containers() if c.kernel_id in fenced]
        # A plan over the fenced kernels alone: nothing else is started, stopped or forgotten.
        running = {k: r for k, r in self.record.running.items() if k in fenced}
        await self.actions.act(plan({}, found, running, self.record.finished & fenced))

    async def reconcile(self) -> None:
        """One level-triggered pass."""
        ledger = self.ledger
        self._check_not_removed()
        if ledger.latest_epoch > self.record.epoch:
            raise AgentSupersededError(
                f"agent {self.node_id}: epoch {ledger.latest_epoch} registered after this "
                f"incarnation's {self.record.epoch} (two agents with one node id?); this one stops"
            )
        if ledger.lost_seq > self._answered_loss:
            # Declared lost while alive (cut off): fence, then come back under a new epoch.
            self._answered_loss = ledger.lost_seq
            await self._fence()
            await self._register()
        await self.images.purge(ledger.purges)
        found = await self._backend.containers()
        todo = plan(ledger.allocations, found, self.record.running, self.record.finished)
        if not todo.empty:
            log.debug("agent %s: pass over %d container(s): %s", self.node_id, len(found), todo)
        await self.actions.act(todo)
        for container in found:
            if container.status == "running":
                self._output.follow(container)

    async def live_logs(self, kernel_id: str) -> str | None:
        """A kernel's output so far, from its container (None if it has none here)."""
        for container in await self._backend.containers():
            if container.kernel_id == kernel_id:
                return await self._backend.logs(container.container_id, self.settings.max_log_bytes)
        return None

    # ---- loops ---------------------------------------------------------------------------

    async def _reconcile_loop(self) -> None:
        failures = 0
        while not cancelling():
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self.reconcile()
                failures = 0
            except (AgentSupersededError, NodeRemovedError):
                raise
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                # Level-triggered: whatever failed (engine, NATS, a write with an unknown
                # outcome) is looked at afresh by the next pass.
                failures += 1
                delay = min(30.0, 0.25 * 2**failures)
                log.exception("agent %s: reconcile failed; again in %.1fs", self.node_id, delay)
                asyncio.get_running_loop().call_later(delay, self._dirty.set)

    async def _follow(self) -> None:
        while not cancelling():
            try:
                # A fetch returns as soon as events arrive; the timeout only bounds an idle
                # wait, so a long one costs no latency and keeps thousands of agents quiet.
                if await self._fold.poll(5.0):
                    self._dirty.set()
            except (nats.errors.Error, TimeoutError, OSError) as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                log.warning("agent %s: reading the ledger failed: %r", self.node_id, exc)
                await asyncio.sleep(1.0)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_interval_s)
            self.actions.images_due = True
            self._dirty.set()

    def _tick(self) -> None:
        reconnects = self._bus.nc.stats["reconnects"]
        if reconnects != self._reconnects:
            # Changes may have been missed while cut off: look again.
            self._reconnects = reconnects
            log.info("agent %s: NATS reconnected; reconciling", self.node_id)
            self._dirty.set()
