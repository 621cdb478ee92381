"""Session vocabulary: types, statuses and results (the names Backend.AI users know), and the
spec a session is asked for with: kernels, cluster mode, batch dependencies, start time, timeout."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from schemas.bounds import (
    DEFAULT_LIMITS,
    MEMORY_MIN_BYTES,
    BoundsError,
    InputLimits,
    check_cpu,
    check_gpu,
    check_memory,
    check_seconds,
    check_text,
)
from schemas.ids import TOKEN_PATTERN
from schemas.resources import ResourceSlots
from schemas.tenancy import SESSION_PRIORITY_DEFAULT, SESSION_PRIORITY_MAX
from schemas.vfolder import MAX_MOUNTS, MountRequest


class SessionType(StrEnum):
    INTERACTIVE = "interactive"
    BATCH = "batch"
    INFERENCE = "inference"
    """One replica of a model-serving endpoint: asked for by the serving controller only,
    never idle-reclaimed; its server's port (``service_port``) is reported as the app
    ``inference``."""


class SessionStatus(StrEnum):
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    PULLING = "PULLING"
    """A node it was placed on is pulling its image."""
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

    @property
    def is_placed(self) -> bool:
        """Placed on nodes and not ending: what preemption may stop and node loss requeue."""
        return self in PLACED_STATUSES


TERMINAL_STATUSES = frozenset(
    {SessionStatus.TERMINATED, SessionStatus.CANCELLED, SessionStatus.ERROR}
)
PLACED_STATUSES = frozenset(
    {
        SessionStatus.SCHEDULED,
        SessionStatus.PULLING,
        SessionStatus.PREPARING,
        SessionStatus.CREATING,
        SessionStatus.RUNNING,
    }
)

_S = SessionStatus

# Every legal status change, in one place (the session aggregate decides by it, the log's
# invariant check replays by it). Terminal statuses lead nowhere. The one way back to PENDING
# from a placed status is a requeue after node loss (``Session.requeue``, asked for by the
# session), which is not an ordinary transition and checks its own rule.
TRANSITIONS: Mapping[SessionStatus, frozenset[SessionStatus]] = {
    _S.PENDING: frozenset({_S.PENDING, _S.SCHEDULED, _S.CANCELLED, _S.ERROR}),
    _S.SCHEDULED: frozenset(
        {_S.PULLING, _S.PREPARING, _S.CREATING, _S.RUNNING, _S.TERMINATING, _S.TERMINATED, _S.ERROR}
    ),
    _S.PULLING: frozenset(
        {_S.PREPARING, _S.CREATING, _S.RUNNING, _S.TERMINATING, _S.TERMINATED, _S.ERROR}
    ),
    _S.PREPARING: frozenset({_S.CREATING, _S.RUNNING, _S.TERMINATING, _S.TERMINATED, _S.ERROR}),
    _S.CREATING: frozenset({_S.RUNNING, _S.TERMINATING, _S.TERMINATED, _S.ERROR}),
    _S.RUNNING: frozenset({_S.TERMINATING, _S.TERMINATED, _S.ERROR}),
    _S.TERMINATING: frozenset({_S.TERMINATED, _S.ERROR}),
    _S.TERMINATED: frozenset(),
    _S.CANCELLED: frozenset(),
    _S.ERROR: frozenset(),
}


class SessionResult(StrEnum):
    """How an ended session went (Backend.AI's ``SessionResult`` without "undefined")."""

    SUCCESS = "success"
    FAILURE = "failure"
    TERMINATED = "terminated"
    """Its end was asked for (by a person, an idle or lifetime limit, a timeout, preemption, a
    drain) before it ended by itself: the exit code is the stop's, not a failure of its own."""


def result_of(
    status: SessionStatus, exit_code: int | None, asked: bool = False
) -> SessionResult | None:
    """TERMINATED with exit code 0 succeeded; another exit code, or ERROR, failed; TERMINATED
    after its end was ``asked`` for was terminated, whatever the stop's exit code. None while
    the session has not ended, when it was cancelled, or when it ended by itself with no exit
    code (its main kernel was stopped before it ran). A dependency asks without ``asked``: only
    a run that exited 0 lets its dependents start."""
    if status is SessionStatus.ERROR:
        return SessionResult.FAILURE
    if status is SessionStatus.TERMINATED and asked:
        return SessionResult.TERMINATED
    if status is not SessionStatus.TERMINATED or exit_code is None:
        return None
    return SessionResult.SUCCESS if exit_code == 0 else SessionResult.FAILURE


class KernelStatus(StrEnum):
    """Where one kernel of a session is (its own fate in a multi-kernel session)."""

    PENDING = "PENDING"
    """Not started yet (or not placed yet)."""
    RUNNING = "RUNNING"
    TERMINATED = "TERMINATED"
    """Exited (with its exit code), or stopped before it started (no exit code)."""
    ERROR = "ERROR"
    """Failed to start."""

    @property
    def has_ended(self) -> bool:
        return self in (KernelStatus.TERMINATED, KernelStatus.ERROR)


def cluster_host(index: int) -> str:
    """The hostname of a session's kernel by index: ``main1``, then ``sub1``, ``sub2``..."""
    return "main1" if index == 0 else f"sub{index}"


MAX_KERNELS = 64
MAX_REQUEUES = 3
"""How often a session asking to be requeued on node loss is placed again; the next loss
ends it ``node-lost`` (a job that kills every node it lands on should not roam for ever)."""
MAX_DEPENDENCIES = 16
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
MAX_COMMAND_WORDS = 1024
MAX_ENV = 256
MAX_TIMEOUT_S = 366 * 24 * 3600
"""A year: longer is a mistake, and a bound keeps ``started_at + timeout`` far from overflow."""


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
    depends_on: tuple[str, ...] = ()
    """Session ids that must end TERMINATED with exit code 0 before this one may be placed; if
    one ends otherwise, this one is cancelled."""
    starts_at: AwareDatetime | None = None
    """Not placed before this time."""
    timeout_s: int | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    """Batch sessions only: terminated this many seconds after it started running."""
    requeue_on_node_loss: bool = False
    """Batch sessions only: when a node it runs on is lost, it waits to be placed again (new
    kernels, up to ``MAX_REQUEUES`` times) instead of ending ``node-lost``."""
    mounts: tuple[MountRequest, ...] = ()
    """Virtual folders to mount, as asked (by name or id). The scheduler resolves them when it
    creates the session (``SessionRequested.mounts``); the caller's dot-folders are added."""
    service_port: int | None = Field(default=None, ge=1, le=65535)
    """Inference sessions only (and required there): the container port its model server
    listens on. The agent reports it as the app ``inference`` (not waited for: a model may
    take long to load; the serving controller's probes say when it answers)."""

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, mounts: tuple[MountRequest, ...]) -> tuple[MountRequest, ...]:
        if len(mounts) > MAX_MOUNTS:
            raise ValueError(f"at most {MAX_MOUNTS} mounts, got {len(mounts)}")
        folders = [m.folder for m in mounts]
        repeated = sorted({f for f in folders if folders.count(f) > 1})
        if repeated:
            raise ValueError(f"folder {repeated[0]!r} is mounted more than once")
        paths = [m.path for m in mounts if m.path is not None]
        twice = sorted({p for p in paths if paths.count(p) > 1})
        if twice:
            raise ValueError(f"two mounts at {twice[0]}: give each folder its own path")
        return mounts

    @field_validator("depends_on")
    @classmethod
    def _dependencies(cls, ids: tuple[str, ...]) -> tuple[str, ...]:
        if len(ids) > MAX_DEPENDENCIES:
            raise ValueError(f"at most {MAX_DEPENDENCIES} dependencies, got {len(ids)}")
        for session_id in ids:
            if not TOKEN_PATTERN.match(session_id):
                raise ValueError(
                    f"dependency {session_id!r} is not a session id: "
                    "use 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'"
                )
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"dependency {repeated[0]!r} is named more than once")
        return ids

    @model_validator(mode="after")
    def _timeout_is_for_batch(self) -> Self:
        if self.timeout_s is not None and self.type is not SessionType.BATCH:
            raise ValueError(
                f"timeout_s applies to batch sessions only, not to {self.type.value} ones"
            )
        if self.requeue_on_node_loss and self.type is not SessionType.BATCH:
            raise ValueError(
                "requeue_on_node_loss applies to batch sessions only, not to "
                f"{self.type.value} ones"
            )
        if (self.service_port is None) is (self.type is SessionType.INFERENCE):
            raise ValueError(
                "service_port is required for inference sessions and applies to them only"
            )
        return self

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for key in env:
            if (
                not key
                or not (key[0].isalpha() or key[0] == "_")
                or not all(c.isalnum() or c == "_" for c in key)
            ):
                raise ValueError(
                    f"environment variable name {key[:40]!r} is not valid: start with a "
                    "letter or '_', then letters, digits or '_'"
                )
        return env

    @property
    def total(self) -> ResourceSlots:
        total = ResourceSlots()
        for kernel in self.kernels:
            total = total + kernel.resources
        return total


def check_request(spec: SessionSpec, limits: InputLimits = DEFAULT_LIMITS) -> None:
    """Refuse a request outside the bounds (``schemas.bounds``), naming the limit: each
    kernel's cpu, memory and gpu, the texts (image, command words, env), the timeout. The
    gateway, the command model and the scheduler's create rule all ask this."""
    check_text("image", spec.image, limits)
    for kernel in spec.kernels:
        slots = kernel.resources
        check_cpu(slots.cpu_milli, limits)
        check_memory(slots.memory_bytes, limits, least=MEMORY_MIN_BYTES)
        check_gpu(slots.gpu_hundredths, limits)
    for word in spec.command or ():
        check_text("a command word", word, limits, lines=True)
    if len(spec.command or ()) > MAX_COMMAND_WORDS:
        raise BoundsError(f"the command has more than {MAX_COMMAND_WORDS} words")
    if len(spec.env) > MAX_ENV:
        raise BoundsError(f"more than {MAX_ENV} environment variables")
    for key, value in spec.env.items():
        if not ENV_NAME.match(key):
            raise BoundsError(
                f"environment variable name {key[:40]!r} is not valid: start with a letter "
                "(A-Z, a-z) or '_', then letters, digits 0-9 or '_'"
            )
        check_text(f"environment variable {key}", value, limits, lines=True)
    if spec.timeout_s is not None:
        check_seconds("timeoutSeconds", spec.timeout_s, limits)
