"""The scheduler's fold: every event it reads (``ev.session.*``, ``ev.node.*``, ``ev.agent.*``,
``ev.quota.*``, ``ev.vfolder.*``, ``ev.activity.*``, the tenancy subjects) goes to its aggregate
family's ``evolve``.

Pure: ``evolve`` does no I/O and reads no clock. It only records what changed and asks for a
pass when one could now decide something new.
"""

from __future__ import annotations

from collections.abc import Callable

from commands.directory import TENANCY_TYPES
from events.envelope import StoredEvent
from schemas.subjects import AggregateType
from services.scheduler.state import activity, agents, folders, nodes, quotas, sessions, tenancy
from services.scheduler.state.model import StateModel
from services.scheduler.state.questions import Questions

EVOLVE: dict[AggregateType, Callable[[StateModel, StoredEvent], None]] = {
    AggregateType.SESSION: sessions.evolve,
    AggregateType.NODE: nodes.evolve,
    AggregateType.AGENT: agents.evolve,
    AggregateType.QUOTA: quotas.evolve,
    AggregateType.VFOLDER: folders.evolve,
    AggregateType.ACTIVITY: activity.evolve,
    **dict.fromkeys(TENANCY_TYPES, tenancy.evolve),  # the directory folds every tenancy type
}
"""Aggregate type -> the family that folds its events; other types are not the scheduler's."""


class SchedulerState(Questions):
    folds_corrections = True  # the directory keeps ev.correction.* (the tenancy service's)

    consumer = "scheduler"

    def evolve(self, event: StoredEvent) -> None:
        # An event a family cannot apply raises: ``FoldedState.apply`` holds its aggregate
        # (one unreadable aggregate must not stop scheduling for every other one).
        family = EVOLVE.get(event.envelope.aggregate_type)
        if family is not None:
            family(self, event)

    def forget(self, subject: str) -> None:
        parts = subject.split(".", 2)
        if len(parts) != 3:
            return
        kind, aggregate_id = parts[1], parts[2]
        if kind == AggregateType.SESSION:
            tracked = self.sessions.pop(aggregate_id, None)
            if tracked is not None:
                for queue in [*self.waiting.values(), *self.unadmitted.values()]:
                    queue.pop(aggregate_id, None)
                self.timed.pop(aggregate_id, None)
        elif kind == AggregateType.NODE:
            self.nodes.pop(aggregate_id, None)
        elif kind == AggregateType.QUOTA:
            self.quotas.pop(aggregate_id, None)
        elif kind == AggregateType.VFOLDER:
            self.folders.forget(subject)
        elif kind in {t.value for t in TENANCY_TYPES}:
            self.directory.forget(subject)
