"""The agent's own aggregate on the log: registration and kernel facts, each written once, guarded.
Reads and writes ``ev.agent.<node id>`` (this agent is its only writer)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from commands.agent import Agent, KernelConflictError, RunningKernel
from commands.repository import pending_write
from events.domain.agent import KernelExited, KernelFailedToStart
from events.envelope import Cause
from events.store import EventStore
from events.writes import AggregateRef, ConcurrencyConflict
from schemas.devices import DeviceInfo, NumaNode
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from services.node.plan import Ended, Report

log = logging.getLogger(__name__)

AGENT_ACTOR = Actor.service("agent")
# Each fact is at most two events; a write stays well inside one atomic batch (1,000).
FACTS_PER_WRITE = 400
ATTEMPTS = 3


class AgentSupersededError(RuntimeError):
    """Another incarnation of this node's agent registered with a newer epoch: this one must
    stop acting for the node."""


@dataclass(frozen=True, slots=True)
class Started:
    kernel_id: str
    session_id: str
    container_id: str


@dataclass(frozen=True, slots=True)
class FailedToStart:
    kernel_id: str
    session_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class ImagesNow:
    images: tuple[str, ...]


Fact = Started | FailedToStart | Ended | ImagesNow


class AgentRecord:
    def __init__(self, store: EventStore, agent_id: str) -> None:
        self._store = store
        self.ref = AggregateRef(AggregateType.AGENT, agent_id)
        self.agent: Agent | None = None
        self.last_seq = 0
        self.epoch = 0
        """The epoch this incarnation registered with (0: not yet)."""
        self.finished: set[str] = set()
        """Kernels whose end or failure is on the log: never started again, never re-reported."""
        self.stale = True

    @property
    def running(self) -> dict[str, RunningKernel]:
        return dict(self.agent.running) if self.agent is not None else {}

    async def load(self) -> None:
        """Read the aggregate back (at start, and after a write whose outcome is unclear)."""
        history = await self._store.read(self.ref)
        self.agent = Agent.rehydrate(e.envelope for e in history.events)
        self.last_seq = history.last_seq
        # The aggregate keeps running kernels only; which ones ended is in its history.
        ended = {KernelExited.event_name, KernelFailedToStart.event_name}
        self.finished = {
            str(e.envelope.payload["kernel_id"]) for e in history.events if e.name in ended
        }
        self.stale = False
        if self.epoch and self.agent is not None and self.agent.epoch != self.epoch:
            raise AgentSupersededError(
                f"agent {self.ref.id}: epoch {self.agent.epoch} registered after this one's "
                f"{self.epoch}; this incarnation stops"
            )

    async def register(
        self,
        *,
        hostname: str,
        backend: str,
        capacity: ResourceSlots,
        devices: Iterable[DeviceInfo],
        images: Iterable[str],
        now: datetime,
        resource_group: str = "default",
        numa: Iterable[NumaNode] = (),
    ) -> int:
        """Register with epoch 1, or the previous epoch + 1 after a restart; returns it."""
        for _ in range(ATTEMPTS):
            if self.stale:
                await self.load()
            if self.agent is None:
                agent = Agent.register(
                    self.ref.id,
                    epoch=1,
                    hostname=hostname,
                    backend=backend,
                    capacity=capacity,
                    devices=devices,
                    numa=numa,
                    images=images,
                    resource_group=resource_group,
                    now=now,
                )
            else:
                agent = self.agent
                agent.reregister(
                    epoch=agent.epoch + 1,
                    hostname=hostname,
                    backend=backend,
                    capacity=capacity,
                    devices=devices,
                    numa=numa,
                    images=images,
                    resource_group=resource_group,
                    now=now,
                )
            if await self._write(agent):
                self.agent, self.epoch = agent, agent.epoch
                return agent.epoch
        raise RuntimeError(f"agent {self.ref.id}: could not register ({ATTEMPTS} conflicts)")

    async def report(self, facts: Sequence[Fact], now: datetime) -> None:
        for first in range(0, len(facts), FACTS_PER_WRITE):
            await self._report(facts[first : first + FACTS_PER_WRITE], now)

    async def _report(self, facts: Sequence[Fact], now: datetime) -> None:
        for _ in range(ATTEMPTS):
            if self.stale:
                await self.load()
            agent = self.agent
            assert agent is not None, "report after register"
            ended = [_decide(agent, fact, now) for fact in facts]
            if await self._write(agent):
                self.finished.update(k for k in ended if k is not None)
                return
        raise RuntimeError(f"agent {self.ref.id}: facts not stored ({ATTEMPTS} conflicts)")

    def forget(self, kernel_ids: Iterable[str]) -> None:
        self.finished.difference_update(kernel_ids)

    async def _write(self, agent: Agent) -> bool:
        """Append the aggregate's decided events; False after a conflict (reload, decide
        again). Any failure leaves the in-memory aggregate ahead of the log, so it is reloaded
        before the next decision."""
        command = new_id()
        cause = Cause(
            causation_id=command,
            correlation_id=command,
            actor=AGENT_ACTOR,
            tenant=SYSTEM_TENANT,
        )
        self.stale = True
        write = pending_write((agent, self.last_seq), cause)
        if write is None:
            self.stale = False
            return True
        try:
            committed = await self._store.append(write)
        except ConcurrencyConflict:
            log.warning("agent %s: its log moved under it; reloading", self.ref.id)
            return False
        self.last_seq = committed.last_seqs[self.ref]
        self.stale = False
        return True


def _decide(agent: Agent, fact: Fact, now: datetime) -> str | None:
    """Apply one fact to the aggregate; returns the kernel id if the kernel is now finished."""
    try:
        if isinstance(fact, Started):
            agent.kernel_started(fact.kernel_id, fact.session_id, fact.container_id, now)
        elif isinstance(fact, FailedToStart):
            agent.kernel_failed_to_start(fact.kernel_id, fact.session_id, fact.reason, now)
            return fact.kernel_id
        elif isinstance(fact, ImagesNow):
            agent.change_images(fact.images, now)
        else:
            _ended(agent, fact, now)
            return fact.kernel_id
    except KernelConflictError as exc:
        # Contradicts what is on the log: report nothing rather than a second truth.
        log.error("agent %s: not reported: %s", agent.id, exc)
    return None


def _ended(agent: Agent, ended: Ended, now: datetime) -> None:
    if ended.report is Report.START_AND_EXIT and ended.container is not None:
        agent.kernel_started(ended.kernel_id, ended.session_id, ended.container.container_id, now)
    if ended.report is Report.NEVER_RAN:
        # Agent.kernel_exited ignores kernels that never ran (so repeats are no-ops), but the
        # scheduler waits for an exit to release the slots. The agent remembers finished
        # kernels itself, so this is written once. (See docs/node-agent.md.)
        agent._trigger(
            Agent.Exited,
            now,
            kernel_id=ended.kernel_id,
            session_id=ended.session_id,
            exit_code=ended.exit_code,
            reason=ended.reason,
        )
    elif ended.report is not Report.NOTHING:
        agent.kernel_exited(ended.kernel_id, ended.exit_code, ended.reason, now)
