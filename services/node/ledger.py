"""What the agent follows on the log: its node's allocation ledger (the desired state, written
by the scheduler) and the registrations on its own agent subject (to notice a newer incarnation).
Reads ``ev.node.<node id>`` and ``ev.agent.<node id>``; writes nothing."""

from __future__ import annotations

from commands.node.aggregate import Node
from commands.node.rules import Allocation
from events.domain.agent import AgentRegistered
from events.domain.node import ImagePurgeRequested, NodeLost
from events.envelope import StoredEvent
from events.fold import FoldedState
from schemas.subjects import AggregateType, event_kind

_AGENT = AggregateType.AGENT.value


class Ledger(FoldedState):
    def __init__(self) -> None:
        super().__init__()
        self.node: Node | None = None
        """None until the scheduler has registered the node (after the first AgentRegistered)."""
        self.lost_seq = 0
        """Stream sequence of the last NodeLost: the agent answers each loss once."""
        self.latest_epoch = 0
        """The newest epoch registered for this node by any incarnation of its agent."""
        self.purges: list[tuple[int, str]] = []
        """Operators' purge requests: (stream sequence, image reference), in order."""

    def skips(self, subject: str, name: str) -> bool:
        """On its own agent subject only registrations count: the agent's facts (a message
        each, every kernel) are read past undecoded."""
        return name != AgentRegistered.event_name and event_kind(subject) == _AGENT

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        if envelope.aggregate_type is AggregateType.AGENT:
            if event.name == AgentRegistered.event_name:
                self.latest_epoch = max(self.latest_epoch, int(envelope.payload["epoch"]))
            return
        # The same aggregate the scheduler decides with, so both read the ledger the same way.
        if self.node is None:
            self.node = Node.rehydrate([envelope])
        else:
            self.node.evolve([envelope])
        if event.name == NodeLost.event_name:
            self.lost_seq = event.seq
        elif event.name == ImagePurgeRequested.event_name:
            self.purges.append((event.seq, str(envelope.payload["reference"])))

    @property
    def allocations(self) -> dict[str, Allocation]:
        return dict(self.node.allocations) if self.node is not None else {}

    @property
    def lost(self) -> bool:
        return self.node is not None and self.node.lost
