"""Node ledgers inside a decision pass: an agent's first registration opens its ledger (same
id), a later one with other hardware changes the ledger's capacity and devices. The agent of a
removed node is ignored (its ledger says ``NodeRemoved``; the agent stops when it reads it).

Writes (through the pass's workspace) ``ev.node.<id>`` (``NodeRegistered``,
``NodeCapacityChanged``).
"""

from __future__ import annotations

from datetime import datetime

from commands.node.aggregate import Node
from events.envelope import Cause
from events.writes import AggregateRef
from schemas.subjects import AggregateType
from services.scheduler.state import SchedulerState
from services.scheduler.steps.common import SCHEDULER
from services.scheduler.workspace import Workspace


def register_node(state: SchedulerState, agent_id: str, space: Workspace, now: datetime) -> None:
    """An agent's first registration opens its node ledger (same id); a later one with other
    hardware changes the ledger's capacity."""
    agent = state.agents.get(agent_id)
    if agent is None or state.is_broken(AggregateRef(AggregateType.NODE, agent_id)):
        return
    source = agent.source
    cause = Cause(
        causation_id=source.event_id,
        correlation_id=source.correlation_id,
        actor=SCHEDULER,
        tenant=source.tenant,
    )
    node = space.node(agent_id)
    if node is not None and node.removed:
        return  # removed for good: its agent stops when it sees that; nothing is recorded
    if node is None:
        node = space.add(
            Node.register(
                agent_id, agent.hostname, agent.resource_group, agent.capacity, now,
                devices=agent.devices, numa=agent.numa,
            )
        )  # fmt: skip
    else:
        node.change_capacity(agent.capacity, now, devices=agent.devices, numa=agent.numa)
        # Registered again after it was declared lost: the agent fenced (stopped what was
        # released) before registering under its new epoch, so it may take work again.
        node.recover(f"agent registered again with epoch {agent.epoch}", now)
    state.gone.pop(agent_id, None)
    space.unit(cause, node)
