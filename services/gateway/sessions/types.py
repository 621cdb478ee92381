"""GraphQL object types of sessions: a session with its history, mounts, apps and queue place,
and a page of them. Built from the projections' query types (``projections.queries``) by their
``of`` classmethods: the only place a view's fields meet their GraphQL names."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.types import Info

from projections.queries import SessionView
from projections.sessions.tables import KernelPort, StatusEntry
from services.gateway.context import Context
from services.gateway.core.types import FairShareFactors, PageInfo, Resources, resources


@strawberry.type
class StatusChange:
    status: str
    reason: str
    at: datetime
    seq: int
    queue_position: int | None = strawberry.field(
        default=None,
        description="while PENDING: 1-based place in its group's queue, if known. A change "
        "that repeats the last seq is the queue moving, not a new event",
    )
    queue_length: int | None = strawberry.field(
        default=None, description="how many wait in its group, when queuePosition is known"
    )

    @classmethod
    def of(cls, entry: StatusEntry, queue: tuple[int, int] | None = None) -> StatusChange:
        position, length = queue if queue is not None else (None, None)
        return cls(
            status=entry.status.value, reason=entry.reason, at=entry.at, seq=entry.seq,
            queue_position=position, queue_length=length,
        )  # fmt: skip


@strawberry.type
class SessionMount:
    folder_id: str
    name: str = strawberry.field(description="the folder's name when the session was created")
    path: str = strawberry.field(description="where it appears in the container")
    read_only: bool


@strawberry.type
class ServicePort:
    kernel_id: str
    name: str = strawberry.field(description="the app's name in its image's label")
    protocol: str = strawberry.field(description="http | tcp | pty | preopen")
    port: int = strawberry.field(description="its port in the container")
    state: str = strawberry.field(
        description="open | never-opened (still closed when the agent stopped waiting) | "
        "not-probed (pty and preopen apps open on demand)"
    )
    public: bool = strawberry.field(description="opened without the owner's authentication")

    @classmethod
    def of(cls, port: KernelPort) -> ServicePort:
        return cls(
            kernel_id=port.kernel_id, name=port.name, protocol=port.protocol.value,
            port=port.port, state=port.state.value, public=port.public,
        )  # fmt: skip


def _queue_place(root: Session, info: Info[Context, Any]) -> tuple[int, int] | None:
    """The queue board's (position, length) of a PENDING session (derived, not in the views;
    none for the past's: the board holds only the queues of now)."""
    if root.status != "PENDING" or root.past:
        return None
    return info.context.services.queues.position(str(root.id))


MAX_HISTORY = 1000
"""A session's history is bounded in what one request returns, like every list."""


def _history(root: Session, last: int = MAX_HISTORY) -> list[StatusChange]:
    if not 1 <= last <= MAX_HISTORY:
        raise GraphQLError(
            f"last must be 1 to {MAX_HISTORY}, got {last}", extensions={"code": "invalid"}
        )
    return root.all_history[-last:]


def _queue_position(root: Session, info: Info[Context, Any]) -> int | None:
    place = _queue_place(root, info)
    return None if place is None else place[0]


def _queue_length(root: Session, info: Info[Context, Any]) -> int | None:
    place = _queue_place(root, info)
    return None if place is None else place[1]


def _per_kernel(cpu_milli: int, memory_bytes: int, gpu_hundredths: int, kernels: int) -> Resources:
    """One kernel's share of a session's total (its kernels are made alike, so it divides)."""
    n = max(kernels, 1)
    return resources(cpu_milli // n, memory_bytes // n, gpu_hundredths // n)


@strawberry.type
class Session:
    id: strawberry.ID
    name: str | None
    status: str
    status_reason: str
    type: str
    image: str
    resources: Resources = strawberry.field(
        description="what the session holds in total: every kernel's together (for "
        "clusterSize 2, twice resourcesPerKernel)"
    )
    resources_per_kernel: Resources = strawberry.field(
        description="what each of its clusterSize kernels holds (they are alike)"
    )
    command: list[str] | None
    node_ids: list[str]
    kernel_ids: list[str]
    exit_code: int | None = strawberry.field(
        description="the main kernel's exit code once TERMINATED; null if it never ran"
    )
    result: str | None = strawberry.field(
        description="success (exit code 0) | failure (another exit code, or ERROR) | "
        "terminated (its end was asked for: terminateSession, an idle or lifetime limit, a "
        "timeout, preemption, a drain; exitCode is then the stop's, statusReason the cause); "
        "null before the end, when cancelled, or when it ended by itself with no exit code"
    )
    depends_on: list[str] = strawberry.field(
        description="sessions that must end TERMINATED with exit code 0 before this one starts"
    )
    starts_at: datetime | None = strawberry.field(description="not placed before this time")
    timeout_seconds: int | None = strawberry.field(
        description="batch: terminated this long after it started running"
    )
    cluster_mode: str = strawberry.field(description="single-node | multi-node")
    cluster_size: int = strawberry.field(description="how many kernels (kernelIds[0]: main)")
    mounts: list[SessionMount] = strawberry.field(
        description="the virtual folders it mounts, as resolved when it was created (the "
        "folders asked for, then the dot-folders added)"
    )
    service_ports: list[ServicePort] = strawberry.field(
        description="its kernels' apps (its image's service ports), each once its kernel's "
        "agent has waited for it; in kernel order"
    )
    fair_share: FairShareFactors | None = strawberry.field(
        description="while PENDING in a fair-share group: its owner's factors, as its "
        "statusReason says them; null otherwise"
    )
    created_at: datetime
    updated_at: datetime
    all_history: strawberry.Private[list[StatusChange]]
    history: list[StatusChange] = strawberry.field(
        resolver=_history,
        description="its status changes, oldest first: the last `last` of them (1 to 1,000)",
    )
    seq: int
    queue_position: int | None = strawberry.field(
        resolver=_queue_position,
        description="1-based place among its resource group's waiting sessions; null unless "
        "PENDING and among the first 10,000 the scheduler published",
    )
    queue_length: int | None = strawberry.field(
        resolver=_queue_length,
        description="how many wait in its resource group; null when queuePosition is",
    )
    past: strawberry.Private[bool] = False
    """Read from the past's views (``asOf``)."""

    @classmethod
    def of(cls, view: SessionView, *, past: bool = False) -> Session:
        r = view.record
        return cls(
            id=strawberry.ID(r.id),
            name=r.name,
            status=r.status.value,
            status_reason=r.status_reason,
            type=r.type,
            image=r.image,
            resources=resources(r.cpu_milli, r.memory_bytes, r.gpu_hundredths),
            resources_per_kernel=_per_kernel(
                r.cpu_milli, r.memory_bytes, r.gpu_hundredths, len(r.kernel_ids)
            ),
            command=None if r.command is None else list(r.command),
            node_ids=list(r.node_ids),
            kernel_ids=list(r.kernel_ids),
            exit_code=r.exit_code,
            result=r.result,
            depends_on=list(r.depends_on),
            starts_at=r.starts_at,
            timeout_seconds=r.timeout_s,
            cluster_mode=r.cluster_mode,
            cluster_size=len(r.kernel_ids),
            mounts=[
                SessionMount(folder_id=m.folder_id, name=m.name, path=m.path, read_only=m.read_only)
                for m in r.mounts
            ],
            service_ports=[ServicePort.of(p) for p in r.service_ports],
            fair_share=FairShareFactors.of(r.fair_share),
            created_at=r.created_at,
            updated_at=r.updated_at,
            all_history=[StatusChange.of(h) for h in view.history],
            seq=r.last_seq,
            past=past,
        )


@strawberry.type
class SessionEdge:
    cursor: str
    node: Session


@strawberry.type
class SessionConnection:
    edges: list[SessionEdge]
    page_info: PageInfo
    seq: int = strawberry.field(
        description="the log position the views held before this page was read: follow what "
        "changes after it with `sessionsChanged(after: seq)`"
    )
    counter: strawberry.Private[Callable[[], Awaitable[int]] | None] = None

    @strawberry.field(description="how many sessions match the filters, on every page")
    async def total_count(self) -> int:
        return 0 if self.counter is None else await self.counter()
