"""The agent's own aggregate on the log: registration and kernel facts, each written once, guarded.
Reads and writes ``ev.agent.<node id>`` (this agent is its only writer)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from commands.agent import Agent, KernelConflictError, RunningKernel
from commands.unit_of_work import Changes, UnitOfWork
from events.domain.agent import KernelExited, KernelFailedToStart
from events.envelope import Cause, StoredEvent
from events.fold import FoldedState
from events.one_by_one import OneByOne
from events.writes import AggregateRef, Store
from schemas.devices import DeviceInfo, NumaNode
from schemas.ids import new_id
from schemas.images import PullCause, PulledLayer
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.service_ports import ReportedPort
from schemas.subjects import AggregateType
from services.node.plan import Ended, Report

log = logging.getLogger(__name__)

AGENT_ACTOR = Actor.service("agent")
# Each fact is at most two events; a write stays well inside one atomic batch (1,000).
FACTS_PER_WRITE = 400
ATTEMPTS = 3
ENDED = frozenset({KernelExited.event_name, KernelFailedToStart.event_name})


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


@dataclass(frozen=True, slots=True)
class PortsFound:
    """What became of a running kernel's apps (``services.node.service_ports``)."""

    kernel_id: str
    ports: tuple[ReportedPort, ...]


@dataclass(frozen=True, slots=True)
class PullStarted:
    reference: str
    kernels: dict[str, str]


@dataclass(frozen=True, slots=True)
class PullProgressed:
    reference: str
    done_bytes: int
    total_bytes: int
    layers: tuple[PulledLayer, ...]


@dataclass(frozen=True, slots=True)
class PullFinished:
    reference: str
    digest: str


@dataclass(frozen=True, slots=True)
class PullFailed:
    reference: str
    cause: PullCause
    reason: str


@dataclass(frozen=True, slots=True)
class Purged:
    reference: str
    request_seq: int
    freed_bytes: int
    refused: str


PullFact = PullStarted | PullProgressed | PullFinished | PullFailed
Fact = Started | FailedToStart | Ended | ImagesNow | PortsFound | PullFact | Purged


class AgentLog(FoldedState):
    """This agent's aggregate as stored, and the kernels whose end or failure is on it."""

    def __init__(self, agent_id: str) -> None:
        super().__init__()
        self.agent_id = agent_id
        self.agent: Agent | None = None
        self.finished: set[str] = set()

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        if self.agent is None:
            self.agent = Agent.rehydrate([envelope])
        else:
            self.agent.evolve([envelope])
        if envelope.name in ENDED:
            self.finished.add(str(envelope.payload["kernel_id"]))


class AgentRecord:
    def __init__(self, store: Store, agent_id: str) -> None:
        self._store = store
        self.ref = AggregateRef(AggregateType.AGENT, agent_id)
        self.log = AgentLog(agent_id)
        self._work = self._unit_of_work()
        self.epoch = 0
        """The epoch this incarnation registered with (0: not yet)."""
        self._finished: set[str] = set()
        """Kernels reported finished whose end wrote nothing (not running on the log)."""
        self._writing = asyncio.Lock()
        """Reports come from the reconcile pass and from pulls at once: one write at a time
        (each decides on the aggregate as the last one left it)."""

    @property
    def agent(self) -> Agent | None:
        return self.log.agent

    @property
    def running(self) -> dict[str, RunningKernel]:
        return dict(self.log.agent.running) if self.log.agent is not None else {}

    @property
    def finished(self) -> set[str]:
        """Kernels whose end or failure is known: never started again, never re-reported."""
        return self.log.finished | self._finished

    def _unit_of_work(self) -> UnitOfWork[Changes]:
        # A report's facts each stand alone: one message each, no atomic batch (events.one_by_one).
        store = OneByOne(self._store)
        return UnitOfWork(store, self.log, lambda: Changes(self.log), attempts=ATTEMPTS)

    async def load(self) -> None:
        """Read the aggregate back from the log (at start)."""
        self.log = AgentLog(self.ref.id)
        self._work = self._unit_of_work()
        for event in (await self._store.read(self.ref)).events:
            self.log.apply(event)
        self._check_epoch()

    def _check_epoch(self) -> None:
        agent = self.log.agent
        if self.epoch and agent is not None and agent.epoch != self.epoch:
            raise AgentSupersededError(
                f"agent {self.ref.id}: epoch {agent.epoch} registered after this one's "
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
        volumes: Iterable[str] = (),
        terminal_url: str = "",
        address: str = "",
    ) -> int:
        """Register with epoch 1, or the previous epoch + 1 after a restart; returns it."""

        def decide(changes: Changes) -> int:
            known = self.log.agent
            if known is None:
                agent = changes.add(
                    Agent.register(
                        self.ref.id, epoch=1, hostname=hostname, backend=backend,
                        capacity=capacity, devices=devices, numa=numa, images=images,
                        resource_group=resource_group, volumes=volumes, now=now,
                        terminal_url=terminal_url, address=address,
                    )
                )  # fmt: skip
            else:
                agent = changes.track(known)
                agent.reregister(
                    epoch=known.epoch + 1, hostname=hostname, backend=backend,
                    capacity=capacity, devices=devices, numa=numa, images=images,
                    resource_group=resource_group, volumes=volumes, now=now,
                    terminal_url=terminal_url, address=address,
                )  # fmt: skip
            changes.unit(_cause(), agent)
            return agent.epoch

        self.epoch, _ = await self._work.run(decide, what=f"registering agent {self.ref.id}")
        return self.epoch

    async def report(self, facts: Sequence[Fact], now: datetime) -> None:
        async with self._writing:
            for first in range(0, len(facts), FACTS_PER_WRITE):
                await self._report(facts[first : first + FACTS_PER_WRITE], now)

    async def _report(self, facts: Sequence[Fact], now: datetime) -> None:
        def decide(changes: Changes) -> list[str]:
            self._check_epoch()
            known = self.log.agent
            assert known is not None, "report after register"
            agent = changes.track(known)
            # After an unknown outcome the log is read back: facts already on it are skipped.
            fresh = [f for f in facts if _kernel_of(f) not in self.log.finished]
            ended = [_decide(agent, fact, now) for fact in fresh]
            changes.unit(_cause(), agent)
            return [k for k in ended if k is not None]

        ended, _ = await self._work.run(decide, what=f"agent {self.ref.id} reporting")
        self._finished.update(ended)

    def forget(self, kernel_ids: Iterable[str]) -> None:
        forgotten = set(kernel_ids)
        self._finished -= forgotten
        self.log.finished -= forgotten


def _cause() -> Cause:
    command = new_id()
    return Cause(
        causation_id=command, correlation_id=command, actor=AGENT_ACTOR, tenant=SYSTEM_TENANT
    )


def _kernel_of(fact: Fact) -> str | None:
    return (
        fact.kernel_id if isinstance(fact, Started | FailedToStart | Ended | PortsFound) else None
    )


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
        elif isinstance(fact, PortsFound):
            agent.report_service_ports(fact.kernel_id, fact.ports, now)
        elif isinstance(fact, Purged):
            agent.image_purged(
                fact.reference, fact.request_seq, fact.freed_bytes, fact.refused, now
            )
        elif isinstance(fact, PullStarted | PullProgressed | PullFinished | PullFailed):
            _pull(agent, fact, now)
        else:
            _ended(agent, fact, now)
            return fact.kernel_id
    except KernelConflictError as exc:
        # Contradicts what is on the log: report nothing rather than a second truth.
        log.error("agent %s: not reported: %s", agent.id, exc)
    return None


def _pull(agent: Agent, fact: PullFact, now: datetime) -> None:
    if isinstance(fact, PullStarted):
        agent.pull_started(fact.reference, fact.kernels, now)
    elif isinstance(fact, PullProgressed):
        agent.pull_progressed(fact.reference, fact.done_bytes, fact.total_bytes, fact.layers, now)
    elif isinstance(fact, PullFinished):
        agent.pull_finished(fact.reference, fact.digest, now)
    else:
        agent.pull_failed(fact.reference, fact.cause, fact.reason, now)


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
