"""What the gateway reads: projections (SQL views) and kernel logs, behind one small protocol."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


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
        self, *, first: int, after: str | None, status: str | None
    ) -> SessionPage: ...

    async def session(self, session_id: str) -> SessionRow | None: ...

    async def nodes(self) -> list[NodeRow]: ...

    async def position(self) -> int: ...

    async def wait_for(self, seq: int, timeout: float) -> bool: ...
