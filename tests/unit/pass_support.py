"""Given/when/then for the scheduler's decision pass and session commands, with no server.

*Given*: the builders here write events to an ``InMemoryStore`` the way their writers would
(tenancy through its aggregates, agents through ``Agent``, sessions through
``SessionCommands``) and fold them into a fresh ``SchedulerState``. *When*: ``World.decide``
runs ``run_pass`` (or a test calls a command). *Then*: ``World.stored`` reads back what the
store holds, decoded into catalogue events.

Writes ``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.keypair.*``,
``ev.resource_policy.*``, ``ev.resource_group.*``, ``ev.agent.*`` and (``rival``, another
writer) whichever aggregate a test races on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from commands.agent import Agent
from commands.aggregate import Aggregate
from commands.dispatch import HandlerContext
from commands.messages import CreateSession, TerminateSession
from commands.node.aggregate import Node
from commands.outcome import Accepted, Decision
from commands.tenancy import Domain, Keypair, Project, ResourceGroup, ResourcePolicy, User
from events.catalogue import CATALOGUE, Event
from events.envelope import Cause
from events.memory import InMemoryStore
from events.writes import AggregateRef, Committed, Store, StoreAround, Write
from schemas.devices import DeviceInfo, DeviceShare
from schemas.ids import new_id, node_id_for_host, session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec, SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import (
    GroupScheduling,
    KeypairPolicyLimits,
    PolicyKind,
    Role,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    email_digest,
    project_id_for,
)
from services.scheduler.passes import run_pass
from services.scheduler.session_commands import SessionCommands
from services.scheduler.state import SchedulerState
from tests.unit.scenario import T0

A = TypeVar("A", bound=Aggregate)
E = TypeVar("E", bound=Event)
GIB = 1 << 30
IMAGE = "python:3.12"
ADMIN = Actor.service("tests-admin")


def slots(cpu: int = 1, mem: int = 1, gpu: int = 0) -> ResourceSlots:
    return ResourceSlots(cpu_milli=cpu * 1000, memory_bytes=mem * GIB, gpu_hundredths=gpu * 100)


def cause_by(actor: Actor) -> Cause:
    cause = new_id()
    return Cause(causation_id=cause, correlation_id=cause, actor=actor, tenant=SYSTEM_TENANT)


class Clock:
    """The time every writer is handed: tests move it, nothing reads the wall clock."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class World:
    store: InMemoryStore = field(default_factory=InMemoryStore)
    state: SchedulerState = field(default_factory=SchedulerState)
    clock: Clock = field(default_factory=Clock)
    agents: dict[str, Agent] = field(default_factory=dict)
    owner: SessionOwner | None = None

    def __post_init__(self) -> None:
        self.commands = SessionCommands(self.state, self.sync)

    @property
    def ctx(self) -> HandlerContext:
        # HandlerContext names EventStore, though handlers only hand it to a unit of work,
        # which takes any ``Store``: the in-memory one keeps the same rules.
        return HandlerContext(self.store, self.clock)

    # ---- given ---------------------------------------------------------------------------

    async def sync(self) -> None:
        """Fold what the store holds (own writes already folded from their acks are skipped),
        and read past it as a tail does."""
        for event in self.store.events():
            self.state.apply(event)
            self.state.position = max(self.state.position, event.seq)

    async def record(self, actor: Actor, *aggregates: Aggregate) -> None:
        """Store what ``aggregates`` decided, each after what the store holds, then fold it."""
        lasts = await self.store.last_seqs([a.ref for a in aggregates])
        cause = cause_by(actor)
        writes = [Write(a.ref, lasts[a.ref], tuple(a.collect(cause))) for a in aggregates]
        await self.store.commit(writes)
        await self.sync()

    async def tenancy(
        self, limits: KeypairPolicyLimits | None = None, scheduling: GroupScheduling | None = None
    ) -> SessionOwner:
        """A domain, a project, a user in it, a keypair under its own policy, and the
        ``default`` resource group (made with ``scheduling`` the first time) associated with
        the domain."""
        now, suffix = self.clock(), new_id()[:8]
        domain, project = f"dom-{suffix}", f"proj-{suffix}"
        project_id = project_id_for(domain, project)
        digest = email_digest(f"user-{suffix}@example.org", b"tests")
        policy = ResourcePolicy.create(
            PolicyKind.KEYPAIR, f"kp-{suffix}", limits or KeypairPolicyLimits(), None, now
        )
        user = User.create(domain, Role.USER, digest, "sealed", "default", [project_id], now)
        access_key = f"AK{suffix.upper()}"
        keypair = Keypair.create(access_key, user.id, domain, new_id(), f"kp-{suffix}", None, now)
        group = await self.group("default")
        if group is None:
            settings = scheduling or GroupScheduling()
            group = ResourceGroup.create("default", "", settings, tuple(SessionType), now)
        group.associate(ScopeKind.DOMAIN, domain, now)
        await self.record(
            ADMIN,
            Domain.create(domain, "", SlotLimits(), now),
            Project.create(project_id, domain, project, "", SlotLimits(), "default", now),
            user, policy, keypair, group,
        )  # fmt: skip
        self.owner = SessionOwner(
            access_key=access_key, user_id=user.id, project_id=project_id, domain=domain
        )
        return self.owner

    async def group(self, name: str) -> ResourceGroup | None:
        """The resource group as the store holds it (None: not created)."""
        history = await self.store.read(AggregateRef(AggregateType.RESOURCE_GROUP, name))
        return ResourceGroup.rehydrate(e.envelope for e in history.events)

    async def register(
        self,
        host: str = "gpu-1",
        capacity: ResourceSlots | None = None,
        *,
        volumes: tuple[str, ...] = (),
    ) -> str:
        """An agent registers (again, with a newer epoch, if it did before), with these
        storage volumes mounted; its node id."""
        agent_id, now = node_id_for_host(host), self.clock()
        capacity = capacity or slots(cpu=8, mem=32, gpu=1)
        devices = tuple(
            DeviceInfo(kind="cuda", index=i, uuid=f"GPU-{host}-{i}")
            for i in range(capacity.gpu_hundredths // 100)
        )
        agent = self.agents.get(agent_id)
        if agent is None:
            agent = self.agents[agent_id] = Agent.register(
                agent_id, epoch=1, hostname=host, backend="simulated", capacity=capacity,
                devices=devices, images=(IMAGE,), volumes=volumes, now=now,
            )  # fmt: skip
        else:
            agent.reregister(
                epoch=agent.epoch + 1, hostname=host, backend="simulated", capacity=capacity,
                devices=devices, images=(IMAGE,), volumes=volumes, now=now,
            )  # fmt: skip
        await self.record(Actor.service(f"agent-{host}"), agent)
        return agent_id

    def _kernel(self, session_id: str) -> tuple[Agent, str]:
        session = self.state.sessions[session_id].session
        kernel_id = session.main_kernel
        return self.agents[session.placements[kernel_id]], kernel_id

    async def started(self, session_id: str) -> None:
        agent, kernel_id = self._kernel(session_id)
        agent.kernel_started(kernel_id, session_id, f"jy-{kernel_id[:8]}", self.clock())
        await self.record(Actor.service("agent"), agent)

    async def exited(self, session_id: str, code: int) -> None:
        agent, kernel_id = self._kernel(session_id)
        agent.kernel_exited(kernel_id, code, "exited", self.clock())
        await self.record(Actor.service("agent"), agent)

    async def failed(self, session_id: str, reason: str) -> None:
        agent, kernel_id = self._kernel(session_id)
        agent.kernel_failed_to_start(kernel_id, session_id, reason, self.clock())
        await self.record(Actor.service("agent"), agent)

    def request(self, need: ResourceSlots | None = None, **fields: Any) -> CreateSession:
        spec = SessionSpec(
            image=IMAGE, kernels=(KernelSpec(resources=need or slots(gpu=1)),), **fields
        )
        return CreateSession(actor=ADMIN, tenant=SYSTEM_TENANT, spec=spec, owner=self.owner)

    async def create(self, need: ResourceSlots | None = None, **fields: Any) -> str:
        """A session requested through ``SessionCommands``; its id."""
        cmd = self.request(need, **fields)
        (decision,) = await self.commands.create_sessions([cmd], self.ctx)
        assert isinstance(decision, Accepted), decision
        return session_id_for(cmd.command_id)

    async def terminate(self, session_id: str) -> Decision:
        cmd = TerminateSession(actor=ADMIN, tenant=SYSTEM_TENANT, session_id=session_id)
        return await self.commands.terminate_session(cmd, self.ctx)

    # ---- when ----------------------------------------------------------------------------

    async def decide(
        self, *, max_events: int = 1000, attempts: int = 3, store: Store | None = None
    ) -> int:
        """One decision pass (through ``store`` when given, e.g. a ``Watched`` one)."""
        return await run_pass(
            self.state, store or self.store, self.clock, max_events=max_events, attempts=attempts
        )

    # ---- then ----------------------------------------------------------------------------

    def last_seq(self) -> int:
        return len(self.store.events())

    def names(self, *, after: int = 0) -> list[str]:
        return [e.envelope.name for e in self.store.events(after_seq=after)]

    def stored(self, kind: type[E], *, after: int = 0) -> list[tuple[str, E]]:
        """Every stored ``kind`` event after ``after``: (aggregate id, event)."""
        found = []
        for stored in self.store.events(after_seq=after):
            if stored.envelope.name == kind.event_name:
                event = CATALOGUE.decode(stored.envelope)
                assert isinstance(event, kind)
                found.append((stored.envelope.aggregate_id, event))
        return found

    def folded_again(self) -> SchedulerState:
        """A fresh state folded from the store: what a restarted scheduler would see."""
        fresh = SchedulerState()
        for event in self.store.events():
            fresh.apply(event)
            fresh.position = event.seq
        return fresh

    async def ledger(self, node_id: str) -> Node:
        """The node ledger as a fresh reader of the log sees it."""
        history = await self.store.read(AggregateRef(AggregateType.NODE, node_id))
        node = Node.rehydrate(e.envelope for e in history.events)
        assert node is not None
        return node


async def rival(
    store: InMemoryStore, cls: type[A], aggregate_id: str, decide: Callable[[A], object]
) -> None:
    """Another writer (a replica that won the race) decides on an aggregate as the store
    holds it and commits, behind the back of the state under test."""
    history = await store.read(AggregateRef(cls.aggregate_type, aggregate_id))
    aggregate = cls.rehydrate(e.envelope for e in history.events)
    assert aggregate is not None
    decide(aggregate)
    cause = cause_by(Actor.service("scheduler-rival"))
    await store.commit([Write(aggregate.ref, history.last_seq, tuple(aggregate.collect(cause)))])


async def rival_allocates(store: InMemoryStore, node_id: str, kernel_id: str, gpu: int) -> None:
    """A rival allocation on a node ledger: whole devices, from the first free one."""

    def allocate(node: Node) -> None:
        use = node.device_use()
        free = [d for d in node.devices if use[d.index] == (False, 0)][:gpu]
        held = tuple(
            DeviceShare(index=d.index, uuid=d.uuid, hundredths=100, whole=True) for d in free
        )
        node.allocate(kernel_id, f"rival-{kernel_id}", slots(gpu=gpu), T0, devices=held)

    await rival(store, Node, node_id, allocate)


class Watched(StoreAround):
    """A ``Store`` over an ``InMemoryStore`` that keeps every group commit handed to it, and
    lets ``before`` (another writer) commit first each time."""

    def __init__(
        self, store: InMemoryStore, before: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        super().__init__(store)
        self.before = before
        self.handed: list[list[Write]] = []

    async def commit(self, writes: list[Write]) -> Committed:
        self.handed.append(writes)
        if self.before is not None:
            await self.before()
        return await self.store.commit(writes)


def holdings(state: SchedulerState) -> dict[str, object]:
    """What a state says is held, to compare one state with another."""
    return {
        "sessions": {sid: t.session.status for sid, t in state.sessions.items()},
        "nodes": {nid: node.allocations for nid, node in state.nodes.items()},
        "quotas": {qid: (q.queued, q.reserved) for qid, q in state.quotas.items()},
        "guards": state.guards,
    }
