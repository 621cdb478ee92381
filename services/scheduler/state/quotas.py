"""Folds ``ev.quota.*`` into the scheduler state: quota scopes, which scopes hold each session,
and the ended sessions a pass must release.
"""

from __future__ import annotations

from commands.quota import Quota
from events.envelope import StoredEvent
from services.scheduler.state.model import StateModel


def evolve(state: StateModel, event: StoredEvent) -> None:
    envelope = event.envelope
    quota = state.quotas.get(envelope.aggregate_id)
    if quota is None:
        created = Quota.rehydrate([envelope])
        assert created is not None
        state.quotas[created.id] = quota = created
    else:
        quota.evolve([envelope])
    # Holding events name the sessions they change (one or many; v1 ones are upcast).
    sessions = envelope.payload.get("sessions")
    if not isinstance(sessions, dict) or not sessions:
        return
    freed = False
    for session_id in sessions:
        holders = state.holdings.setdefault(session_id, set())
        if quota.holds(session_id):
            holders.add(quota.id)
            tracked = state.sessions.get(session_id)
            if tracked is not None and tracked.session.status.is_terminal:
                state.releasable[session_id] = None
                freed = True
            continue
        holders.discard(quota.id)
        if not holders:
            del state.holdings[session_id]
            state.releasable.pop(session_id, None)
        freed = True  # room was freed (by another replica, or ours before a restart)
    if freed:
        state.ask_for_pass()
