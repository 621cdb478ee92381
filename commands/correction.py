"""The ``correction`` aggregate (``ev.correction.<id>``): the operator's corrections of one
held aggregate, decided by the tenancy service. Pure."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.errors import DomainError
from events.domain.correction import AggregateVoided, EventSkipped
from schemas.ids import derived_id
from schemas.subjects import AggregateType

SUBJECT = re.compile(r"^ev\.[a-z_]{1,32}\.[A-Za-z0-9_-]{1,64}$")


def correction_id_for(subject: str) -> str:
    return derived_id("correction", subject)


class VoidedError(DomainError):
    """A voided aggregate is given up for good: nothing more is skipped in it."""


class Correction(Aggregate):
    aggregate_type = AggregateType.CORRECTION

    class State(BaseModel):
        subject: str
        skipped: tuple[int, ...]
        voided: bool

    def __init__(self) -> None:
        self.subject = ""
        self.skipped: tuple[int, ...] = ()
        self.voided = False

    @classmethod
    def skip(cls, subject: str, seq: int, reason: str, now: datetime) -> Correction:
        return cls._create(
            cls.Skipped, id=correction_id_for(subject), timestamp=now, subject=subject,
            seq=seq, reason=reason,
        )  # fmt: skip

    @classmethod
    def void(cls, subject: str, reason: str, now: datetime) -> Correction:
        return cls._create(
            cls.Voided, id=correction_id_for(subject), timestamp=now, subject=subject,
            reason=reason,
        )  # fmt: skip

    def skip_more(self, seq: int, reason: str, now: datetime) -> bool:
        if self.voided:
            raise VoidedError(f"{self.subject} is voided: there is nothing left to skip")
        if seq in self.skipped:
            return False
        return self._trigger(self.SkippedMore, now, subject=self.subject, seq=seq, reason=reason)

    def void_too(self, reason: str, now: datetime) -> bool:
        if self.voided:
            return False
        return self._trigger(self.VoidedNow, now, subject=self.subject, reason=reason)

    # ``EventSkipped`` and ``AggregateVoided`` both may start the aggregate; loading picks
    # the class by whether it exists.
    class Skipped(EventSkipped, Aggregate.Created):
        def apply(self, correction: Correction) -> None:
            correction.subject = self.subject
            correction.skipped = (*correction.skipped, self.seq)

    class SkippedMore(EventSkipped, Aggregate.Event):
        def apply(self, correction: Correction) -> None:
            correction.skipped = (*correction.skipped, self.seq)

    class Voided(AggregateVoided, Aggregate.Created):
        def apply(self, correction: Correction) -> None:
            correction.subject = self.subject
            correction.voided = True

    class VoidedNow(AggregateVoided, Aggregate.Event):
        def apply(self, correction: Correction) -> None:
            correction.voided = True
