"""The ``activity`` aggregate (``ev.activity.<reporter id>``): one reporter's reports that
sessions were in use. Written only by that reporter (a node's agent, an app proxy replica).

It keeps no state but its version: a report decides nothing about earlier ones, so a reporter
continues its aggregate from its last event alone and never reads its history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from events.domain.activity import ActivityReport, SessionActivityReported
from events.snapshots import Snapshot
from schemas.subjects import AggregateType


class Activity(Aggregate):
    aggregate_type = AggregateType.ACTIVITY

    class State(BaseModel):
        pass  # nothing: see the module's docstring

    @classmethod
    def reported(
        cls, reporter_id: str, reports: Sequence[ActivityReport], now: datetime
    ) -> Activity:
        """A reporter's first reports, which open its aggregate."""
        return cls._create(cls.Opened, id=reporter_id, timestamp=now, reports=tuple(reports))

    def report(self, reports: Sequence[ActivityReport], now: datetime) -> bool:
        return self._trigger(self.Reported, now, reports=tuple(reports))

    @classmethod
    def at_version(cls, reporter_id: str, version: int, at: datetime) -> Activity:
        """The aggregate after its ``version``-th event (written at ``at``): nothing else is
        needed, so an event this code cannot read (a newer reporter's) stops nothing."""
        state = {"created_on": at, "modified_on": at, "attributes": {}}
        return cls.from_snapshot(
            Snapshot(
                aggregate_type=cls.aggregate_type, aggregate_id=reporter_id, version=version,
                seq=0, taken_at=at, state=state,
            )
        )  # fmt: skip

    # One wire name for every report: the first opens the aggregate, later ones add to it,
    # and loading picks the class by whether the aggregate exists (so its last event alone
    # rebuilds it, at its version).
    class Opened(SessionActivityReported, Aggregate.Created):
        pass

    class Reported(SessionActivityReported, Aggregate.Event):
        pass


def record(
    activity: Activity | None, reporter_id: str, reports: Sequence[ActivityReport], now: datetime
) -> Activity:
    """Add one event of reports to the reporter's aggregate, opening it if it has none yet."""
    if activity is None:
        return Activity.reported(reporter_id, reports, now)
    activity.report(reports, now)
    return activity
