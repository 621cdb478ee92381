"""GraphQL object types: sessions with their history and logs, nodes, command outcomes."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from enum import Enum

import strawberry

from services.gateway.views import NodeRow, SessionRow, StatusChangeRow


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
class StatusChange:
    status: str
    reason: str
    at: datetime
    seq: int

    @classmethod
    def of(cls, row: StatusChangeRow) -> StatusChange:
        return cls(status=row.status, reason=row.reason, at=row.at, seq=row.seq)


@strawberry.type
class Resources:
    cpu: str = strawberry.field(description="cores, as a decimal string")
    memory_bytes: str = strawberry.field(description="bytes, as a string (can exceed 2^31)")
    gpu: str = strawberry.field(description="devices, as a decimal string (0.01 steps)")


def _resources(cpu_milli: int, memory_bytes: int, gpu_hundredths: int) -> Resources:
    return Resources(
        cpu=str(Decimal(cpu_milli) / 1000),
        memory_bytes=str(memory_bytes),
        gpu=str(Decimal(gpu_hundredths) / 100),
    )


@strawberry.type
class Session:
    id: strawberry.ID
    name: str | None
    status: str
    status_reason: str
    type: str
    image: str
    resources: Resources
    command: list[str] | None
    node_ids: list[str]
    kernel_ids: list[str]
    exit_code: int | None
    created_at: datetime
    updated_at: datetime
    history: list[StatusChange]
    seq: int

    @classmethod
    def of(cls, row: SessionRow) -> Session:
        return cls(
            id=strawberry.ID(row.id),
            name=row.name,
            status=row.status,
            status_reason=row.reason,
            type=row.type,
            image=row.image,
            resources=_resources(row.cpu_milli, row.memory_bytes, row.gpu_hundredths),
            command=row.command,
            node_ids=row.node_ids,
            kernel_ids=row.kernel_ids,
            exit_code=row.exit_code,
            created_at=row.created_at,
            updated_at=row.updated_at,
            history=[StatusChange.of(h) for h in row.history],
            seq=row.seq,
        )


@strawberry.type
class SessionEdge:
    cursor: str
    node: Session


@strawberry.type
class PageInfo:
    has_next_page: bool
    end_cursor: str | None


@strawberry.type
class SessionConnection:
    edges: list[SessionEdge]
    page_info: PageInfo


@strawberry.type
class Node:
    id: strawberry.ID
    hostname: str
    resource_group: str
    capacity: Resources
    used: Resources
    allocations: int
    cordoned: bool
    lost: bool

    @classmethod
    def of(cls, row: NodeRow) -> Node:
        return cls(
            id=strawberry.ID(row.id),
            hostname=row.hostname,
            resource_group=row.resource_group,
            capacity=_resources(row.cpu_milli, row.memory_bytes, row.gpu_hundredths),
            used=_resources(row.used_cpu_milli, row.used_memory_bytes, row.used_gpu_hundredths),
            allocations=row.allocations,
            cordoned=row.cordoned,
            lost=row.lost,
        )
