"""Folds the tenancy subjects (``ev.domain.*``, ``ev.project.*``, ``ev.user.*``,
``ev.keypair.*``, ``ev.resource_policy.*``, ``ev.resource_group.*``, ``ev.image.*``) into the
scheduler's directory (and a group's fair-share half-life into the usage book), and asks for a
pass when sessions wait on what changed.
"""

from __future__ import annotations

from events.envelope import StoredEvent
from schemas.subjects import AggregateType
from services.scheduler.state.model import StateModel


def evolve(state: StateModel, event: StoredEvent) -> None:
    state.directory.evolve(event)
    envelope = event.envelope
    if envelope.aggregate_type is AggregateType.RESOURCE_GROUP:
        # A new half-life counts from the change on: what was used before decayed up to then.
        group, at = envelope.aggregate_id, envelope.occurred_at.timestamp()
        half_life = state.directory.group_scheduling(group).fair_share.usage_half_life_s
        state.usage.offer(event.seq, lambda book: book.set_half_life(group, half_life, at))
    # A policy, a keypair or a scope changed: admission may decide otherwise.
    if any(state.unadmitted.values()) or any(state.waiting.values()):
        state.ask_for_pass()
