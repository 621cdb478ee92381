"""What the scheduler keeps of the log (no subjects of its own: the fold fills it, the
questions read it): tracked sessions, node ledgers, quota scopes, agents, the directory, the
virtual folders, the queues and the work a decision pass must look at.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from commands.directory import Directory
from commands.folders.index import Folders
from commands.node.aggregate import Node
from commands.quota import Quota
from commands.session.aggregate import Session
from events.domain.agent import (
    ImagePullStarted,
    KernelExited,
    KernelFailedToStart,
    KernelStarted,
)
from events.envelope import Envelope
from events.fold import FoldedState
from placement import NodeOffer, Placer
from placement.fairshare import Account
from schemas.devices import DeviceInfo, NumaNode
from schemas.principal import Tenant
from schemas.resources import ResourceSlots
from services.scheduler.rules.deadlines import NEVER, LastActivity
from services.scheduler.state.usage import UsageFeed

DEFAULT_RESOURCE_GROUP = "default"

KernelFact = KernelStarted | KernelExited | KernelFailedToStart | ImagePullStarted


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
    activity: LastActivity = NEVER
    """When it was last reported in use while running (``ev.activity.*``): its idle timeout."""

    @property
    def account(self) -> Account:
        """Whose its usage is for fair share, as the usage view tags it (``projections.usage``):
        a session from before tenancy counts under its tenant."""
        owner = self.session.owner
        if owner is None:
            return (self.tenant.domain, self.tenant.project or "", "")
        return (owner.domain, owner.project_id, owner.user_id)


@dataclass(frozen=True, slots=True)
class AgentInfo:
    hostname: str
    capacity: ResourceSlots
    images: frozenset[str]
    epoch: int
    resource_group: str
    source: Envelope
    """The event that said this: node ledger changes made for the agent name it as cause."""
    devices: tuple[DeviceInfo, ...] = ()
    numa: tuple[NumaNode, ...] = ()
    volumes: frozenset[str] = frozenset()
    """The storage volumes mounted there: placement's match for sessions' folders."""
    address: str = ""
    """Its underlay address: where a multi-node session's other nodes send its VXLAN packets."""


@dataclass(frozen=True, slots=True)
class KeptOffer:
    """A node's placement offer and what it was made from: the very ledger object at its
    version and the very agent record (both replaced or moved on by any change)."""

    node: Node
    version: int
    agent: AgentInfo | None
    offer: NodeOffer


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


class StateModel(FoldedState):
    """The scheduler state's fields; ``SchedulerState`` adds the fold and the questions."""

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
        self.folders = Folders()
        """Every virtual folder, for resolving a new session's mounts."""
        self.quotas: dict[str, Quota] = {}
        self.holdings: dict[str, set[str]] = {}
        """Session id -> ids of the quota scopes that queue or reserve it."""
        self.releasable: dict[str, None] = {}
        """Ended sessions some quota scope still holds: a pass releases them."""
        self.usage = UsageFeed()
        """Each owner's decayed usage of each resource group (fair share), folded from the
        node ledgers' allocations and releases at their own times, in the log's order:
        ``usage.until(position)``."""
        self.placers: dict[str, Placer] = {}
        """Resource group -> its placer (what placement remembers between passes)."""
        self.offers: dict[str, KeptOffer] = {}
        """Node id -> what placement was offered of it, kept while the committed ledger and
        its agent stay as they were (``steps.place.offer_of``): a pass over a thousand nodes
        builds offers only for those that changed."""
        self.preempting: dict[str, dict[str, None]] = {}
        """Waiting session -> the sessions preempted for it that have not ended yet: while
        any has not, it preempts no more (what they hold comes back when they end)."""
        self.preempt_from: dict[str, int] = {}
        """Resource group -> where in its queue the next pass's victim searches start (when
        the last pass stopped at its limit)."""
        self.timed: dict[str, None] = {}
        """RUNNING sessions with a timeout (batch): a pass stops those past it."""
        self.next_wake: datetime | None = None
        """The earliest time a pass must run again by itself (a start time, a timeout)."""
        self.queues: dict[str, list[str]] = {}
        """Resource group -> the sessions the last pass left waiting, in queue order."""
        self.image_holders: dict[str, set[str]] = {}
        """Image -> the agents that report it."""
        self.agents_to_check: dict[str, None] = {}
        """Agents that (re)registered: a pass opens or updates their node ledgers."""
        self.gone: dict[str, None] = {}
        """Agents whose heartbeat is gone: a pass declares their nodes lost (kept until the
        folded ledger says lost, so a pass that could not commit leaves them here)."""
        self.facts: deque[Fact] = deque()
        """Kernel facts a pass has yet to turn into session and ledger changes."""

    def ask_for_pass(self) -> None:
        """Something changed that a decision pass could act on (unless it is the pass's own)."""
        if not self.quiet:
            self.wake()
