"""The scheduler's view of the cluster, folded from ``ev.session.*``, ``ev.node.*``,
``ev.agent.*``, ``ev.quota.*`` and the tenancy subjects: sessions, node ledgers and quota
scopes (the aggregates it alone writes), what each agent reports, the tenancy directory, the
sessions waiting for admission per domain and for placement per resource group, and the work
a decision pass must look at.

Pure: ``evolve`` does no I/O and reads no clock. It only records what changed and calls
``wake`` when a decision pass could now decide something new.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from commands.directory import TENANCY_TYPES, Directory
from commands.node import Node
from commands.quota import Quota
from commands.session import Session
from events.catalogue import CATALOGUE
from events.domain.agent import (
    AgentImagesChanged,
    AgentRegistered,
    KernelExited,
    KernelFailedToStart,
    KernelStarted,
)
from events.envelope import Envelope, StoredEvent
from events.fold import FoldedState
from events.writes import AggregateRef
from schemas.devices import DeviceInfo, NumaNode
from schemas.principal import Tenant
from schemas.resources import ResourceSlots
from schemas.session import SessionStatus
from schemas.subjects import AggregateType
from services.scheduler.placement import Placer

log = logging.getLogger(__name__)

DEFAULT_RESOURCE_GROUP = "default"

# Node ledger events after which a waiting session may fit where it did not before.
CAPACITY_EVENTS = frozenset(
    {
        "NodeRegistered",
        "NodeCapacityChanged",
        "ResourcesReleased",
        "NodeUncordoned",
        "NodeRecovered",
    }
)

KernelFact = KernelStarted | KernelExited | KernelFailedToStart


@dataclass
class TrackedSession:
    """A session with what later decisions about it carry in their envelopes."""

    session: Session
    tenant: Tenant
    correlation_id: str
    last_event_id: str
    order: int = 0
    """The stream sequence of its request: the queue's arrival order."""
    placeable_since: float = 0.0
    """When it was admitted (epoch seconds): how long it has waited for placement."""


@dataclass(frozen=True, slots=True)
class AgentInfo:
    hostname: str
    capacity: ResourceSlots
    images: frozenset[str]
    epoch: int
    resource_group: str
    source: Envelope
    devices: tuple[DeviceInfo, ...] = ()
    numa: tuple[NumaNode, ...] = ()
    """The event that said this: node ledger changes made for the agent name it as cause."""


@dataclass(frozen=True, slots=True)
class Fact:
    """Something an agent reported about a kernel, to turn into session and ledger changes."""

    agent_id: str
    event: KernelFact
    envelope: Envelope


@dataclass
class Work:
    """What a decision pass took from the state; handed back if the pass could not commit."""

    agents: list[str] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)


class SchedulerState(FoldedState):
    def __init__(
        self,
        *,
        default_resource_group: str = DEFAULT_RESOURCE_GROUP,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__()
        self.default_resource_group = default_resource_group
        self.wake = wake
        self.quiet = False
        """Set while a pass records its own writes: what it did needs no further pass."""
        self.sessions: dict[str, TrackedSession] = {}
        self.nodes: dict[str, Node] = {}
        self.agents: dict[str, AgentInfo] = {}
        self.waiting: dict[str, dict[str, None]] = {}
        """Resource group -> ids of its admitted PENDING sessions (an ordered set, in the
        order folded; placement's queue orders them): what placement looks at."""
        self.unadmitted: dict[str, dict[str, None]] = {}
        """Domain -> ids of its PENDING sessions not yet admitted, in the order folded (own
        requests come from their acks, ahead of other replicas' earlier ones): admission
        sorts them by request sequence (``TrackedSession.order``)."""
        self.directory = Directory()
        self.quotas: dict[str, Quota] = {}
        self.holdings: dict[str, set[str]] = {}
        """Session id -> ids of the quota scopes that queue or reserve it."""
        self.releasable: dict[str, None] = {}
        """Ended sessions some quota scope still holds: a pass releases them."""
        self.placers: dict[str, Placer] = {}
        """Resource group -> its placer (what placement remembers between passes)."""
        self.timed: dict[str, None] = {}
        """RUNNING sessions with a timeout (batch): a pass stops those past it."""
        self.next_wake: datetime | None = None
        """The earliest time a pass must run again by itself (a start time, a timeout)."""
        self.queues: dict[str, list[str]] = {}
        """Resource group -> the sessions the last pass left waiting, in queue order."""
        self.broken: set[str] = set()
        """Subjects whose events this code cannot fold; never decided on (and said loudly)."""
        self._images: dict[str, set[str]] = {}
        self._agents_to_check: dict[str, None] = {}
        self._facts: deque[Fact] = deque()

    # ---- questions -----------------------------------------------------------------------

    def image_known(self, image: str) -> bool:
        return bool(self._images.get(image))

    def is_broken(self, ref: AggregateRef) -> bool:
        return ref.subject in self.broken

    # ---- work for a pass -----------------------------------------------------------------

    def take_work(self) -> Work:
        work = Work(list(self._agents_to_check), list(self._facts))
        self._agents_to_check.clear()
        self._facts.clear()
        return work

    def give_back(self, work: Work) -> None:
        """Put taken work back in front (facts keep their order; deciding them is idempotent)."""
        self._agents_to_check = dict.fromkeys([*work.agents, *self._agents_to_check])
        self._facts.extendleft(reversed(work.facts))

    # ---- folding -------------------------------------------------------------------------

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        if envelope.subject in self.broken:
            return
        kind = envelope.aggregate_type
        try:
            if kind is AggregateType.SESSION:
                self._evolve_session(envelope, event.seq)
            elif kind is AggregateType.NODE:
                self._evolve_node(envelope)
            elif kind is AggregateType.AGENT:
                self._evolve_agent(envelope)
            elif kind is AggregateType.QUOTA:
                self._evolve_quota(envelope)
            elif kind in TENANCY_TYPES:
                self.directory.evolve(event)
                # A policy, a keypair or a scope changed: admission may decide otherwise.
                if any(self.unadmitted.values()) or any(self.waiting.values()):
                    self._wake()
        except Exception as exc:
            # One unreadable aggregate (written by newer code, or not by Jetyard) must not
            # stop scheduling for every other one; it is left alone and said loudly.
            self.broken.add(envelope.subject)
            self._forget(envelope)
            log.warning("cannot fold %s (seq %d): %s", envelope.subject, event.seq, exc)

    def _evolve_session(self, envelope: Envelope, seq: int) -> None:
        tracked = self.sessions.get(envelope.aggregate_id)
        if tracked is None:
            session = Session.rehydrate([envelope])
            assert session is not None
            tracked = TrackedSession(session, envelope.tenant, envelope.correlation_id, "", seq)
            self.sessions[session.id] = tracked
        else:
            tracked.session.evolve([envelope])
        tracked.last_event_id = envelope.event_id
        session = tracked.session
        pending = session.status is SessionStatus.PENDING
        if pending and session.admitted and not tracked.placeable_since:
            tracked.placeable_since = envelope.occurred_at.timestamp()
        if session.status is SessionStatus.RUNNING and session.spec.timeout_s is not None:
            self.timed[session.id] = None
        else:
            self.timed.pop(session.id, None)
        self._queue(
            self.waiting, session.spec.resource_group, session.id, pending and session.admitted
        )
        if session.owner is not None:
            self._queue(
                self.unadmitted, session.owner.domain, session.id, pending and not session.admitted
            )
        if session.status.is_terminal and session.id in self.holdings:
            self.releasable[session.id] = None
            self._wake()

    def _queue(self, queues: dict[str, dict[str, None]], key: str, sid: str, inside: bool) -> None:
        queue = queues.setdefault(key, {})
        if inside:
            if sid not in queue:
                queue[sid] = None
                self._wake()
        else:
            queue.pop(sid, None)

    def _evolve_quota(self, envelope: Envelope) -> None:
        quota = self.quotas.get(envelope.aggregate_id)
        if quota is None:
            created = Quota.rehydrate([envelope])
            assert created is not None
            self.quotas[created.id] = quota = created
        else:
            quota.evolve([envelope])
        # Holding events name the sessions they change (one or many; v1 ones are upcast).
        sessions = envelope.payload.get("sessions")
        if not isinstance(sessions, dict) or not sessions:
            return
        freed = False
        for session_id in sessions:
            holders = self.holdings.setdefault(session_id, set())
            if quota.holds(session_id):
                holders.add(quota.id)
                tracked = self.sessions.get(session_id)
                if tracked is not None and tracked.session.status.is_terminal:
                    self.releasable[session_id] = None
                    freed = True
                continue
            holders.discard(quota.id)
            if not holders:
                del self.holdings[session_id]
                self.releasable.pop(session_id, None)
            freed = True  # room was freed (by another replica, or ours before a restart)
        if freed:
            self._wake()

    # ---- admission -------------------------------------------------------------------------

    def admission_domains(self) -> set[str]:
        """Domains with admission work: sessions to admit, reservations to release, or
        waiting sessions whose keypair was deactivated."""
        found = {domain for domain, queue in self.unadmitted.items() if queue}
        for session_id in self.releasable:
            tracked = self.sessions.get(session_id)
            if tracked is not None and tracked.session.owner is not None:
                found.add(tracked.session.owner.domain)
        for queue in self.waiting.values():
            for session_id in queue:
                owner = self.sessions[session_id].session.owner
                if owner is not None and not self.keypair_active(owner.access_key):
                    found.add(owner.domain)
        return found

    def wake_at(self, when: datetime) -> None:
        """Ask for a pass at ``when`` (the earliest asked for wins)."""
        if self.next_wake is None or when < self.next_wake:
            self.next_wake = when

    def due(self) -> datetime | None:
        """When the next pass must run by itself: a start time noted by the last pass, or the
        earliest timeout of a running session."""
        due = self.next_wake
        for session_id in self.timed:
            deadline = self.sessions[session_id].session.timeout_at
            if deadline is not None and (due is None or deadline < due):
                due = deadline
        return due

    def placement_groups(self) -> set[str]:
        """Resource groups with sessions to place now, or soon (once admitted)."""
        found = {group for group, queue in self.waiting.items() if queue}
        for queue in self.unadmitted.values():
            for session_id in queue:
                found.add(self.sessions[session_id].session.spec.resource_group)
        return found

    def keypair_active(self, access_key: str) -> bool:
        keypair = self.directory.keypairs.get(access_key)
        return keypair is None or keypair.active

    def _evolve_node(self, envelope: Envelope) -> None:
        node = self.nodes.get(envelope.aggregate_id)
        if node is None:
            created = Node.rehydrate([envelope])
            assert created is not None
            self.nodes[created.id] = created
        else:
            node.evolve([envelope])
        if envelope.name in CAPACITY_EVENTS:
            self._wake()

    def _evolve_agent(self, envelope: Envelope) -> None:
        if envelope.name not in AGENT_EVENTS:
            return  # agents may report more than the scheduler needs (or newer facts)
        agent_id = envelope.aggregate_id
        event = CATALOGUE.decode(envelope)
        if isinstance(event, AgentRegistered):
            self._set_images(agent_id, event.images)
            self.agents[agent_id] = AgentInfo(
                hostname=event.hostname,
                capacity=event.capacity,
                images=frozenset(event.images),
                epoch=event.epoch,
                # AgentRegistered has no resource group yet: an agent that sends one anyway
                # is honoured, every other joins the default group.
                resource_group=str(
                    envelope.payload.get("resource_group") or self.default_resource_group
                ),
                source=envelope,
                devices=event.devices,
                numa=event.numa,
            )
            self._agents_to_check[agent_id] = None
        elif isinstance(event, AgentImagesChanged):
            known = self.agents.get(agent_id)
            if known is None:
                return
            self._set_images(agent_id, event.images)
            self.agents[agent_id] = replace(known, images=frozenset(event.images))
        elif isinstance(event, KernelStarted | KernelExited | KernelFailedToStart):
            self._facts.append(Fact(agent_id, event, envelope))
        self._wake()

    def _set_images(self, agent_id: str, images: Iterable[str]) -> None:
        for holders in self._images.values():
            holders.discard(agent_id)
        for image in images:
            self._images.setdefault(image, set()).add(agent_id)

    def _forget(self, envelope: Envelope) -> None:
        if envelope.aggregate_type is AggregateType.SESSION:
            tracked = self.sessions.pop(envelope.aggregate_id, None)
            if tracked is not None:
                for queue in [*self.waiting.values(), *self.unadmitted.values()]:
                    queue.pop(envelope.aggregate_id, None)
        elif envelope.aggregate_type is AggregateType.NODE:
            self.nodes.pop(envelope.aggregate_id, None)
        elif envelope.aggregate_type is AggregateType.QUOTA:
            self.quotas.pop(envelope.aggregate_id, None)

    def _wake(self) -> None:
        if not self.quiet:
            self.wake()


AGENT_EVENTS = frozenset(
    cls.event_name
    for cls in (
        AgentRegistered,
        AgentImagesChanged,
        KernelStarted,
        KernelExited,
        KernelFailedToStart,
    )
)
