"""The outcome of a command, written exactly once to ``out.<command id>`` in ``JY_OUTCOMES``.

A handler returns a decision (``Accepted`` or ``Rejected``); the runner stamps it with the
command id and the time and stores it. Rejections live only here (and in the access log),
never on an aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from pydantic import AwareDatetime, BaseModel, ConfigDict, model_validator

from events.writes import Committed
from schemas.ids import Token


class OutcomeStatus(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class Code(StrEnum):
    """Well-known rejection codes. ``Outcome.code`` is a plain string so that a reader still
    loads an outcome carrying a code added by newer code."""

    INVALID = "invalid"
    CONFLICT = "conflict"
    NOT_FOUND = "not-found"
    FORBIDDEN = "forbidden"
    QUOTA = "quota-exceeded"
    UNSUPPORTED = "unsupported"
    REFUSED = "refused"  # a domain rule said no (e.g. an illegal status change)
    PARKED = "parked"


@dataclass(frozen=True, slots=True)
class Accepted:
    aggregate_ids: tuple[str, ...] = ()
    event_seqs: tuple[int, ...] = ()
    message: str = "accepted"

    @classmethod
    def of(cls, committed: Committed, message: str = "accepted") -> Accepted:
        """What a store commit touched: its aggregates and event sequences."""
        ids = tuple(ref.id for ref in committed.last_seqs)
        return cls(aggregate_ids=ids, event_seqs=committed.seqs, message=message)


@dataclass(frozen=True, slots=True)
class Rejected:
    code: str
    message: str


Decision = Accepted | Rejected


class Outcome(BaseModel):
    # Outcomes are read by other services, maybe newer or older: ignore unknown fields.
    model_config = ConfigDict(frozen=True, extra="ignore")

    command_id: Token
    status: OutcomeStatus
    code: str | None = None
    message: str
    aggregate_ids: tuple[str, ...] = ()
    event_seqs: tuple[int, ...] = ()
    decided_at: AwareDatetime

    @model_validator(mode="after")
    def _code_iff_rejected(self) -> Outcome:
        if (self.status is OutcomeStatus.REJECTED) != (self.code is not None):
            raise ValueError("a rejected outcome needs a code and an accepted one has none")
        return self

    @property
    def accepted(self) -> bool:
        return self.status is OutcomeStatus.ACCEPTED

    @classmethod
    def of(cls, command_id: str, decision: Decision, decided_at: datetime) -> Outcome:
        if isinstance(decision, Accepted):
            return cls(
                command_id=command_id,
                status=OutcomeStatus.ACCEPTED,
                message=decision.message,
                aggregate_ids=decision.aggregate_ids,
                event_seqs=decision.event_seqs,
                decided_at=decided_at,
            )
        return cls.rejected(command_id, decision.code, decision.message, decided_at)

    @classmethod
    def rejected(cls, command_id: str, code: str, message: str, decided_at: datetime) -> Outcome:
        return cls(
            command_id=command_id,
            status=OutcomeStatus.REJECTED,
            code=str(code),
            message=message,
            decided_at=decided_at,
        )
