"""The scheduler's fold: every event it reads (``ev.session.*``, ``ev.node.*``, ``ev.agent.*``,
``ev.quota.*``, the tenancy subjects) goes to its aggregate family's ``evolve``.

Pure: ``evolve`` does no I/O and reads no clock. It only records what changed and asks for a
pass when one could now decide something new.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from commands.directory import TENANCY_TYPES
from events.envelope import Envelope, StoredEvent
from schemas.subjects import AggregateType
from services.scheduler.state import agents, nodes, quotas, sessions, tenancy
from services.scheduler.state.model import StateModel
from services.scheduler.state.questions import Questions

log = logging.getLogger(__name__)

EVOLVE: dict[AggregateType, Callable[[StateModel, StoredEvent], None]] = {
    AggregateType.SESSION: sessions.evolve,
    AggregateType.NODE: nodes.evolve,
    AggregateType.AGENT: agents.evolve,
    AggregateType.QUOTA: quotas.evolve,
    **dict.fromkeys(TENANCY_TYPES, tenancy.evolve),  # the directory folds every tenancy type
}
"""Aggregate type -> the family that folds its events; other types are not the scheduler's."""


class SchedulerState(Questions):
    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        if envelope.subject in self.broken:
            return
        family = EVOLVE.get(envelope.aggregate_type)
        if family is None:
            return
        try:
            family(self, event)
        except Exception as exc:
            # One unreadable aggregate (written by newer code, or not by Jetyard) must not
            # stop scheduling for every other one; it is left alone and said loudly.
            self.broken.add(envelope.subject)
            self._forget(envelope)
            log.warning("cannot fold %s (seq %d): %s", envelope.subject, event.seq, exc)

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
