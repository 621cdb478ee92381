"""Session vocabulary: types and statuses (the names Backend.AI users know)."""

from __future__ import annotations

from enum import StrEnum


class SessionType(StrEnum):
    INTERACTIVE = "interactive"
    BATCH = "batch"


class SessionStatus(StrEnum):
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    PREPARING = "PREPARING"
    CREATING = "CREATING"
    RUNNING = "RUNNING"
    TERMINATING = "TERMINATING"
    TERMINATED = "TERMINATED"
    CANCELLED = "CANCELLED"
    ERROR = "ERROR"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {SessionStatus.TERMINATED, SessionStatus.CANCELLED, SessionStatus.ERROR}
)
