"""Folds ``ev.node.*`` into the scheduler state: the node ledgers, each owner's decayed usage
(fair share: ``ResourcesAllocated`` and ``ResourcesReleased`` at their own envelope times, so
usage stored while the scheduler was down counts the same; fed in the log's order, ``usage``),
and a pass asked for when capacity may have freed.
"""

from __future__ import annotations

from commands.node.aggregate import Node
from events.envelope import StoredEvent
from placement.fairshare import Account
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
        group, account = _whose(state, held.session_id, ledger)
        slots = held.slots
        state.usage.offer(
            event.seq, lambda book: book.allocate(kernel_id, group, account, slots, at)
        )
    elif envelope.name == "ResourcesReleased":
        kernel_id = envelope.payload["kernel_id"]
        state.usage.offer(event.seq, lambda book: book.release(kernel_id, at))
    if envelope.name in CAPACITY_EVENTS:
        state.ask_for_pass()


def _whose(state: StateModel, session_id: str, node: Node) -> tuple[str, Account]:
    """The group and owner an allocation's usage counts under, as the usage view tags it
    (``projections.usage``): a session from before tenancy counts under its tenant."""
    tracked = state.sessions.get(session_id)
    if tracked is None:
        return node.resource_group, ("", "", "")
    owner = tracked.session.owner
    group = tracked.session.spec.resource_group
    if owner is None:
        return group, (tracked.tenant.domain, tracked.tenant.project or "", "")
    return group, (owner.domain, owner.project_id, owner.user_id)
