"""The scheduler's view of the cluster, folded from ``ev.session.*``, ``ev.node.*``,
``ev.agent.*``, ``ev.quota.*``, ``ev.vfolder.*``, ``ev.activity.*`` and the tenancy subjects;
writes nothing.

Sessions, node ledgers and quota scopes (the aggregates the scheduler alone writes), what each
agent reports, the tenancy directory, the virtual folders, the sessions waiting for admission
per domain and for placement per resource group, and the work a decision pass must look at.
One module per aggregate family folds its events (``sessions``, ``nodes``, ``agents``,
``quotas``, ``folders``, ``activity``, ``tenancy``); ``fold`` routes each event to its family;
``questions`` answers what the service and the pass ask; ``model`` holds the fields and records.
"""

from services.scheduler.state.agents import AGENT_EVENTS
from services.scheduler.state.fold import SchedulerState
from services.scheduler.state.model import (
    DEFAULT_RESOURCE_GROUP,
    AgentInfo,
    Fact,
    KernelFact,
    TrackedSession,
    Work,
)
from services.scheduler.state.nodes import CAPACITY_EVENTS

__all__ = [
    "AGENT_EVENTS",
    "CAPACITY_EVENTS",
    "DEFAULT_RESOURCE_GROUP",
    "AgentInfo",
    "Fact",
    "KernelFact",
    "SchedulerState",
    "TrackedSession",
    "Work",
]
