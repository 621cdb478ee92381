"""Create step; writes ``ev.session.<id>`` and ``ev.quota.<keypair scope>``.

One keypair's share of a run of creates: its sessions (``SessionRequested``) and the one event
that takes them into the keypair's queue (``QuotaScopeOpened``, ``QuotaSessionQueued``),
stored as one unit through the create command's workspace.
"""

from __future__ import annotations

from datetime import datetime

from commands.aggregate import Aggregate
from commands.quota import Quota
from commands.session.aggregate import Session
from events.envelope import Cause
from schemas.resources import ZERO, ResourceSlots
from services.scheduler.workspace import Workspace


class QueueRun:
    """One keypair's creates in a run, and its queue: flushed as one unit (a session is never
    stored without its queue place)."""

    def __init__(self, queue: Quota) -> None:
        self.queue = queue
        self.parts: list[tuple[Cause, Aggregate]] = []
        self.sessions: dict[str, ResourceSlots] = {}
        self.added: tuple[int, ResourceSlots] = (0, ZERO)
        """What the run queued that its queue does not hold yet: pending limits count it."""

    def add(self, cause: Cause, session: Session, slots: ResourceSlots) -> None:
        self.parts.append((cause, session))
        self.sessions[session.id] = slots
        self.added = (self.added[0] + 1, self.added[1] + slots)

    def flush(self, space: Workspace, now: datetime) -> None:
        if not self.parts:
            return
        # The queue event names the first create of the unit as its cause.
        self.queue.queue(self.sessions, now)
        space.joint([*self.parts, (self.parts[0][0], self.queue)])
        self.parts, self.sessions, self.added = [], {}, (0, ZERO)
