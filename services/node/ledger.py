"""This node's allocation ledger, folded from ``ev.node.<node id>`` (written by the scheduler
only): the agent's desired state. Reads ``ev.node.<node id>``; writes nothing."""

from __future__ import annotations

from commands.node import Allocation, Node
from events.domain.node import NodeLost
from events.envelope import StoredEvent
from events.fold import FoldedState


class Ledger(FoldedState):
    def __init__(self) -> None:
        super().__init__()
        self.node: Node | None = None
        """None until the scheduler has registered the node (after the first AgentRegistered)."""
        self.lost_seq = 0
        """Stream sequence of the last NodeLost: the agent answers each loss once."""

    def evolve(self, event: StoredEvent) -> None:
        # The same aggregate the scheduler decides with, so both read the ledger the same way.
        if self.node is None:
            self.node = Node.rehydrate([event.envelope])
        else:
            self.node.evolve([event.envelope])
        if event.name == NodeLost.event_name:
            self.lost_seq = event.seq

    @property
    def allocations(self) -> dict[str, Allocation]:
        return dict(self.node.allocations) if self.node is not None else {}

    @property
    def lost(self) -> bool:
        return self.node is not None and self.node.lost
