"""The scheduler service: folds the log, answers session commands and runs decision passes.

Reads ``ev.session.*``, ``ev.node.*``, ``ev.agent.*``, ``ev.quota.*``, ``ev.vfolder.*`` (to
resolve a new session's mounts), ``ev.activity.*`` (idle timeouts) and the tenancy subjects
(one ordered tail) and
``cmd.session.*`` (durable consumer). Writes ``ev.session.<id>``, ``ev.node.<id>``,
``ev.quota.<id>``, ``out.<command id>``, leases in ``jy-leases``
(``admit.<domain>`` for admission, ``sched.<resource group>`` for placement) and each group's
queue in ``jy-queues``.

Nothing is decided before the fold has caught up with the log's end as read at start. Passes
are event-driven: the fold wakes them when something could change a decision (a session
requested, capacity freed, an agent registered, a kernel fact); triggers that arrive while a
pass runs are coalesced into the next one. There are no polling ticks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable
from datetime import datetime

from commands.directory import TENANCY_TYPES
from commands.messages import CreateSession, TerminateSession
from commands.node.messages import (
    CordonNode,
    DrainNode,
    PurgeImage,
    RemoveNode,
    UncordonNode,
)
from commands.runner import CommandRunner, utc_now
from events.bus import Bus
from events.cancelling import cancelling
from events.fold import Fold
from events.follower import Follower
from events.leases import Lease
from events.metrics import Metrics
from events.queues import QueueBoard
from events.store import EventStore
from schemas.ids import new_id
from schemas.settings import input_limits
from schemas.subjects import AggregateType
from services.scheduler.heartbeats import HeartbeatWatch
from services.scheduler.metrics import LatencyObserved, latency_histogram, watch_scheduler
from services.scheduler.node_commands import NodeCommands
from services.scheduler.passes import run_pass
from services.scheduler.session_commands import SessionCommands
from services.scheduler.settings import SchedulerSettings
from services.scheduler.state import SchedulerState

log = logging.getLogger(__name__)

FOLDED = (
    AggregateType.SESSION,
    AggregateType.NODE,
    AggregateType.AGENT,
    AggregateType.QUOTA,
    AggregateType.VFOLDER,
    AggregateType.ACTIVITY,
    *TENANCY_TYPES,
)
SYNC_TIMEOUT_S = 10.0
LINGER_WHILE_BUSY_S = 0.1
"""A trigger this soon after the last pass ended finds the scheduler busy: the pass lingers
(``SchedulerSettings.pass_linger_s``) to gather what comes with it."""
STOP_GRACE_S = 10.0


def nodes_durable(durable: str) -> str:
    """The durable consumer of ``cmd.node.*``: its own, next to the one of ``cmd.session.*``
    (a consumer's filters are not widened under an existing installation)."""
    return f"{durable}-nodes"[:64]


class Scheduler:
    def __init__(
        self, bus: Bus, settings: SchedulerSettings, *, clock: Callable[[], datetime] = utc_now
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._wake = asyncio.Event()
        self.state = SchedulerState(
            default_resource_group=settings.default_resource_group, wake=self._wake.set
        )
        self.fold = Fold(bus, self.state, kinds=FOLDED)
        self.store = EventStore(bus)
        self.metrics = Metrics()
        """What ``/metrics`` shows (``services.scheduler.metrics``, docs/metrics.md)."""
        # Passes write through it: each SessionScheduled they store is timed.
        self.pass_store = LatencyObserved(self.store, self.state, latency_histogram(self.metrics))
        self.published: dict[str, list[str]] = {}
        """Resource group -> the queue the last pass left there, as published to jy-queues."""
        self.commands = SessionCommands(self.state, self.sync, limits=input_limits())
        self.runner = CommandRunner(
            bus,
            {
                CreateSession: self.commands.create_session,
                TerminateSession: self.commands.terminate_session,
            },
            durable=settings.durable,
            aggregate_type=AggregateType.SESSION,
            # Creates come in runs: one decision and one group commit for each run.
            batch_handlers={CreateSession: self.commands.create_sessions},
            # Its own store: commands' writes are counted apart from the passes'.
            store=EventStore(bus),
            clock=clock,
            fetch_timeout=settings.command_fetch_timeout_s,
        )
        self.node_commands = NodeCommands(self.state, self._wake, writing=self.commands.writing)
        self.node_runner = CommandRunner(
            bus,
            {
                CordonNode: self.node_commands.cordon_node,
                DrainNode: self.node_commands.drain_node,
                UncordonNode: self.node_commands.uncordon_node,
                PurgeImage: self.node_commands.purge_image,
                RemoveNode: self.node_commands.remove_node,
            },
            durable=nodes_durable(settings.durable),
            aggregate_type=AggregateType.NODE,
            store=EventStore(bus),
            clock=clock,
            fetch_timeout=settings.command_fetch_timeout_s,
        )
        self._bus = bus
        self.holder = f"{settings.durable}-{new_id()[:8]}"
        self.leases: dict[str, Lease] = {}
        """Lease key -> lease, once this replica wanted it: ``admit.<domain>`` (admission)
        and ``sched.<resource group>`` (placement)."""
        self.passes = 0
        """Passes that ran (with or without writing): for tests and metrics."""
        self._stopping = False
        self._deciding = False
        self._passed_at = -math.inf
        """When (event loop time) the last pass ended: a pass lingers only while busy."""
        self._decider: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.queues = QueueBoard.on(bus)
        self.heartbeats = HeartbeatWatch(
            bus, self._heartbeat_gone, ttl_s=3 * bus.settings.heartbeat_interval_s
        )
        self._sweep: asyncio.Task[None] | None = None
        self._follower = Follower(
            self.fold, self.store,
            poll_timeout_s=settings.poll_timeout_s, retry_after_s=settings.retry_after_s,
        )  # fmt: skip
        watch_scheduler(self.metrics, self, bus, clock)

    # ---- life cycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Catch up with the log, then follow it, decide, and take commands. A start that
        fails (the command consumer refused, say) stops what it had started, then raises."""
        try:
            target = await self.fold.catch_up(timeout=self.settings.poll_timeout_s)
            log.info(
                "caught up at seq %d: %d sessions (%d waiting), %d nodes, %d agents",
                target, len(self.state.sessions), sum(map(len, self.state.waiting.values())),
                len(self.state.nodes), len(self.state.agents),
            )  # fmt: skip
            self._follower.start("scheduler:follow")
            if self.settings.watch_heartbeats:
                self.heartbeats.start()
                self._sweep = asyncio.create_task(
                    self.heartbeats.sweep(self._live_nodes, self.settings.sweep_after_s),
                    name="scheduler:sweep",
                )
            self._decider = asyncio.create_task(self._decide(), name="scheduler:decide")
            await self.runner.start()
            await self.node_runner.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop taking commands, finish the pass in hand, stop following. The durable
        consumer stays: commands sent meanwhile wait for the next start."""
        if self._stopping:
            return
        self._stopping = True
        if self._timer is not None:
            self._timer.cancel()
        await self.runner.stop()
        await self.node_runner.stop()
        self._wake.set()
        if self._decider is not None:
            if not (await asyncio.wait({self._decider}, timeout=STOP_GRACE_S))[0]:
                self._decider.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._decider
        if self._sweep is not None:
            self._sweep.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweep
        await self.heartbeats.stop()
        await self.queues.flush()
        for lease in self.leases.values():
            await lease.release()
        await self._follower.stop()
        await self.fold.close()

    # ---- node loss -----------------------------------------------------------------------

    def _live_nodes(self) -> list[str]:
        return [
            node_id for node_id, node in self.state.nodes.items() if not (node.lost or node.removed)
        ]

    def _heartbeat_gone(self, agent_id: str) -> None:
        node = self.state.nodes.get(agent_id)
        if node is None or node.lost or node.removed:  # a removed node's agent has stopped
            return
        self.state.gone[agent_id] = None
        self._wake.set()

    # ---- following the log ---------------------------------------------------------------

    async def sync(self) -> None:
        """Return once everything stored before this call is folded."""
        await self._follower.sync(SYNC_TIMEOUT_S)

    async def settle(self, timeout: float = SYNC_TIMEOUT_S) -> None:
        """Return once everything stored before this call is folded and decided: no pass is
        running or due. (Tests use it before asserting that nothing more happens.)"""
        await self.sync()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._wake.is_set() or self._deciding:
            if loop.time() > deadline:
                raise TimeoutError(f"the scheduler is still deciding after {timeout}s")
            await asyncio.sleep(0.01)

    # ---- deciding ------------------------------------------------------------------------

    async def _decide(self) -> None:
        settings = self.settings
        while not cancelling():
            await self._wake.wait()
            loop = asyncio.get_running_loop()
            if settings.pass_linger_s and loop.time() - self._passed_at < LINGER_WHILE_BUSY_S:
                # Group commit while busy: what arrives in the next few ms joins this pass's
                # batch. After a quiet spell the first trigger is decided at once: a lone
                # session (or a kernel's start) does not wait for company that is not coming.
                await asyncio.sleep(settings.pass_linger_s)
            # Checked after the linger: clearing the wake-up below must not swallow stop()'s.
            if self._stopping:
                return
            self._wake.clear()
            self._deciding = True
            try:
                may_admit: Callable[[str], bool] = _anything
                may_place: Callable[[str], bool] = _anything
                if settings.leases:
                    domains, groups = await self._hold_leases()
                    may_admit, may_place = domains.__contains__, groups.__contains__
                await run_pass(
                    self.state, self.pass_store, self._clock,
                    max_events=settings.max_batch_events, attempts=settings.pass_attempts,
                    may_admit=may_admit, may_place=may_place, writing=self.commands.writing,
                )  # fmt: skip
            except Exception as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                log.exception("decision pass failed; trying again in %ss", settings.retry_after_s)
                await asyncio.sleep(settings.retry_after_s)
                self._wake.set()
            finally:
                self._deciding = False
                self._passed_at = loop.time()
            self.passes += 1
            self._set_timer()
            await self._publish_queues()

    async def _publish_queues(self) -> None:
        """Each group's waiting sessions in queue order, for ``queuePosition`` (derived state
        in ``jy-queues``, not events: positions shift with every placement)."""
        queues, self.state.queues = self.state.queues, {}
        self.published.update(queues)
        for group, waiting in queues.items():
            await self.queues.publish(group, waiting, len(waiting))

    def _set_timer(self) -> None:
        """Wake a pass by itself when a start time or a timeout comes (no polling ticks)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        due = self.state.due()
        if due is not None:
            delay = max(0.0, (due - self._clock()).total_seconds())
            self._timer = asyncio.get_running_loop().call_later(delay, self._wake.set)

    async def _hold_leases(self) -> tuple[set[str], set[str]]:
        """The domains with admission work and the resource groups with placement work whose
        lease this replica holds (taken, or renewed when it runs low). Where another replica
        holds one, try again once it could have expired: a replica that died must not leave
        its domains unadmitted or its groups unplaced. A replica that fails to renew a lease
        stops deciding for that partition at once; the optimistic-concurrency guards refuse
        whatever it had in flight."""
        domains = await self._hold("admit", self.state.admission_domains())
        groups = await self._hold("sched", self.state.placement_groups())
        return domains, groups

    async def _hold(self, kind: str, wanted: set[str]) -> set[str]:
        held: set[str] = set()
        missed = False
        ttl = self.settings.lease_ttl_s
        for name in sorted(wanted):
            key = f"{kind}.{name}"
            lease = self.leases.get(key)
            if lease is None:
                lease = self.leases[key] = Lease(self._bus, key, self.holder, ttl)
            if (lease.held and lease.remaining_s > ttl / 2) or await lease.acquire():
                held.add(name)
            else:
                missed = True
        if missed:
            asyncio.get_running_loop().call_later(ttl / 2, self._wake.set)
        return held


def _anything(name: str) -> bool:
    return True
