"""Folds ``ev.node.*`` into the scheduler state: the node ledgers, each owner's decayed usage
(fair share: ``ResourcesAllocated`` and ``ResourcesReleased`` at their own envelope times, so
usage stored while the scheduler was down counts the same; fed in the log's order, ``usage``,
which also resolves whose each allocation is), and a pass asked for when capacity may have
freed.
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
    at = envelope.occurred_at.timestamp()
    if envelope.name == "ResourcesAllocated":
        kernel_id = envelope.payload["kernel_id"]
        ledger = state.nodes[envelope.aggregate_id]
        held = ledger.allocations[kernel_id]
        # Whose it is is resolved by the feed in the log's order, not here: this event may be
        # folded (read back after a conflict) before its session's request reaches the tail.
        state.usage.allocated(
            event.seq, kernel_id, held.session_id, held.slots, at, ledger.resource_group
        )
    elif envelope.name == "ResourcesReleased":
        kernel_id = envelope.payload["kernel_id"]
        state.usage.offer(event.seq, lambda book: book.release(kernel_id, at))
    if envelope.name in CAPACITY_EVENTS:
        state.ask_for_pass()
