"""Every domain event of Jetyard, by aggregate. Importing this package fills the catalogue."""

from events.domain import (
    activity,
    agent,
    correction,
    join,
    node,
    quota,
    serving,
    session,
    tenancy,
    vfolder,
)

__all__ = [
    "activity",
    "agent",
    "correction",
    "join",
    "node",
    "quota",
    "serving",
    "session",
    "tenancy",
    "vfolder",
]
