"""Folds ``ev.activity.*`` into the scheduler state: when each running session was last
reported in use (``TrackedSession.activity``), which its idle timeout counts from. CPU and GPU
use counts as use when it reached the threshold of the owner's policy as folded at that point
of the log (any reported use while the policy sets none), so a refold decides the same.

A report about a session that is not running (ended before the report was written, or
unknown) changes nothing. So does an event that cannot be read (a newer reporter's source,
say): it is skipped with a warning rather than holding its reporter's aggregate, since a held
reporter would make every session it reports on look idle. An activity time later than its
report's is taken as the report's: a reporter's clock cannot hold a session open. Asks for no
pass: activity only moves an idle deadline later, and the timer already set wakes a pass that
finds the new one.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from events.catalogue import CATALOGUE, UnknownEventError
from events.domain.activity import SessionActivityReported
from events.envelope import StoredEvent
from schemas.session import SessionStatus
from services.scheduler.state.model import StateModel

log = logging.getLogger(__name__)


def evolve(state: StateModel, event: StoredEvent) -> None:
    envelope = event.envelope
    if envelope.name != SessionActivityReported.event_name:
        return  # reporters may say more than the scheduler needs (or newer things)
    try:
        reported = CATALOGUE.decode(envelope)
    except (ValidationError, UnknownEventError) as exc:
        log.warning("activity report at seq %d skipped: %s", event.seq, exc)
        return
    assert isinstance(reported, SessionActivityReported)
    for report in reported.reports:
        tracked = state.sessions.get(report.session_id)
        if tracked is None or tracked.session.status is not SessionStatus.RUNNING:
            continue
        at = min(report.at, envelope.occurred_at)
        owner = tracked.session.owner
        limits = state.directory.keypair_limits(owner.access_key) if owner is not None else None
        threshold = limits.idle_utilization_threshold_pct if limits is not None else None
        pct = report.utilization_pct
        tracked.activity = tracked.activity.seen(report.source, at, pct, threshold)
