"""Session vocabulary: types and statuses (the names Backend.AI users know)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.resources import ResourceSlots
from schemas.tenancy import SESSION_PRIORITY_DEFAULT, SESSION_PRIORITY_MAX


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


MAX_KERNELS = 64


class ClusterMode(StrEnum):
    """Where the kernels of a cluster session go."""

    SINGLE_NODE = "single-node"
    """All on one node."""
    MULTI_NODE = "multi-node"
    """One placement per kernel; kernels may land on different nodes."""


class KernelSpec(BaseModel):
    """One container of a session and the resources it asks for."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    resources: ResourceSlots


class SessionSpec(BaseModel):
    """What a researcher asked for. Lenient when read from the log; commands reject unknown
    fields in their raw input with ``schemas.strict.unknown_fields``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    image: str = Field(min_length=1, max_length=256, pattern=r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")
    type: SessionType = SessionType.INTERACTIVE
    kernels: tuple[KernelSpec, ...] = Field(min_length=1, max_length=MAX_KERNELS)
    command: tuple[str, ...] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    name: str | None = Field(default=None, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    resource_group: str = Field(default="default", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    priority: int = Field(default=SESSION_PRIORITY_DEFAULT, ge=0, le=SESSION_PRIORITY_MAX)
    """Higher goes first; a keypair's policy caps it (``max_priority``)."""
    cluster_mode: ClusterMode = ClusterMode.SINGLE_NODE

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if (
                not key
                or not (key[0].isalpha() or key[0] == "_")
                or not all(c.isalnum() or c == "_" for c in key)
            ):
                raise ValueError(f"environment variable name {key!r} is not valid")
        return env

    @property
    def total(self) -> ResourceSlots:
        total = ResourceSlots()
        for kernel in self.kernels:
            total = total + kernel.resources
        return total
