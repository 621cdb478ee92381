"""Folds the tenancy subjects (``ev.domain.*``, ``ev.project.*``, ``ev.user.*``,
``ev.keypair.*``, ``ev.resource_policy.*``, ``ev.resource_group.*``, ``ev.image.*``) into the
scheduler's directory, and asks for a pass when sessions wait on what changed.
"""

from __future__ import annotations

from events.envelope import StoredEvent
from services.scheduler.state.model import StateModel


def evolve(state: StateModel, event: StoredEvent) -> None:
    state.directory.evolve(event)
    # A policy, a keypair or a scope changed: admission may decide otherwise.
    if any(state.unadmitted.values()) or any(state.waiting.values()):
        state.ask_for_pass()
