"""Folds ``ev.node.*`` into the scheduler state: the node ledgers, and a pass asked for when
capacity may have freed.
"""

from __future__ import annotations

from commands.node.aggregate import Node
from events.envelope import StoredEvent
from services.scheduler.state.model import StateModel

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


def evolve(state: StateModel, event: StoredEvent) -> None:
    envelope = event.envelope
    node = state.nodes.get(envelope.aggregate_id)
    if node is None:
        created = Node.rehydrate([envelope])
        assert created is not None
        state.nodes[created.id] = created
    else:
        node.evolve([envelope])
    if envelope.name in CAPACITY_EVENTS:
        state.ask_for_pass()
