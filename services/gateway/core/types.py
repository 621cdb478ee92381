"""GraphQL object types the features share: a command's outcome, a page's info and an amount
of resources (``resources`` builds one from the views' integer units)."""

from __future__ import annotations

from decimal import Decimal
from enum import Enum

import strawberry

from schemas.fair_share import FairShareStanding


@strawberry.enum
class OutcomeStatus(Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    PENDING = "pending"


@strawberry.type
class CommandOutcome:
    command_id: strawberry.ID
    status: OutcomeStatus
    code: str | None
    message: str
    session_id: strawberry.ID | None
    seq: int | None = strawberry.field(description="stream sequence of the last event written")


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class Resources:
    cpu: str = strawberry.field(description="cores, as a decimal string")
    memory_bytes: str = strawberry.field(description="bytes, as a string (can exceed 2^31)")
    gpu: str = strawberry.field(description="devices, as a decimal string (0.01 steps)")


def resources(cpu_milli: int, memory_bytes: int, gpu_hundredths: int) -> Resources:
    return Resources(
        cpu=str(Decimal(cpu_milli) / 1000),
        memory_bytes=str(memory_bytes),
        gpu=str(Decimal(gpu_hundredths) / 100),
    )


@strawberry.type(
    description="Where a waiting session's owner stands in a fair-share group, as the scheduler "
    "ordered its queue: each level's factor 2^(-usage/share), 0 to 1, two decimals; after "
    "priority the queue takes the highest domain, then project, then user (docs/scheduling.md)"
)
class FairShareFactors:
    domain: float
    project: float
    user: float = strawberry.field(description="Slurm's classic fair-share factor")

    @classmethod
    def of(cls, standing: FairShareStanding | None) -> FairShareFactors | None:
        if standing is None:
            return None
        return cls(domain=standing.domain, project=standing.project, user=standing.user)
