"""What the gateway reads: projections (SQL views) and kernel logs, behind one small protocol."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from schemas.tenancy import SESSION_PRIORITY_DEFAULT


@dataclass(frozen=True, slots=True)
class StatusChangeRow:
    seq: int
    status: str
    reason: str
    at: datetime


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    seq: int
    name: str | None
    status: str
    reason: str
    type: str
    image: str
    cpu_milli: int
    memory_bytes: int
    gpu_hundredths: int
    command: list[str] | None
    node_ids: list[str]
    kernel_ids: list[str]
    exit_code: int | None
    created_at: datetime
    updated_at: datetime
    history: list[StatusChangeRow]
    # Whose it is (None for sessions from before tenancy: only superadmins see those).
    access_key: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    domain: str | None = None
    priority: int = SESSION_PRIORITY_DEFAULT
    admitted: bool = True
    """Slots reserved on every quota scope; a PENDING session that is not waits for admission."""
    result: str | None = None
    """success | failure once ended; None before, when cancelled, or with no exit code."""
    depends_on: tuple[str, ...] = ()
    starts_at: datetime | None = None
    timeout_s: int | None = None
    cluster_mode: str = "single-node"


@dataclass(frozen=True, slots=True)
class NodeRow:
    id: str
    hostname: str
    resource_group: str
    cpu_milli: int
    memory_bytes: int
    gpu_hundredths: int
    used_cpu_milli: int
    used_memory_bytes: int
    used_gpu_hundredths: int
    allocations: int
    cordoned: bool
    lost: bool


@dataclass(frozen=True, slots=True)
class SessionPage:
    rows: list[SessionRow]
    cursors: list[str]
    has_next: bool


class Views(Protocol):
    async def sessions(
        self,
        *,
        first: int,
        after: str | None,
        status: str | None,
        domain: str | None = None,
        user_id: str | None = None,
    ) -> SessionPage:
        """A page in request order; ``domain`` and ``user_id`` narrow it to the owner's (the
        resolvers pass them by the caller's role). Cursors stay valid under any filter."""
        ...

    async def session(self, session_id: str) -> SessionRow | None: ...

    async def nodes(self) -> list[NodeRow]: ...

    async def position(self) -> int: ...

    async def wait_for(self, seq: int, timeout: float) -> bool: ...
