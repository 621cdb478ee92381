"""The session aggregate's rules and value types: the status transition table (kept in
``schemas.session``, where the log's invariant check below this layer replays the very table
the aggregate decides by), the errors its commands raise, one line of the status timeline, and
one kernel's state. Pure; no subjects."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import AwareDatetime, BaseModel, ConfigDict

from commands.errors import DomainError
from schemas.session import TRANSITIONS as TRANSITIONS
from schemas.session import KernelStatus, SessionStatus

S = SessionStatus


class InvalidPlacementError(DomainError):
    """A placement does not name exactly the session's kernels."""


class UnknownKernelError(DomainError):
    """A kernel fact names a kernel that is not part of the session."""


@dataclass(frozen=True, slots=True)
class StatusChange:
    """One line of the status timeline users see. A plain dataclass (pydantic validates it
    inside a snapshot): every event a scheduler folds adds one, from fields its event already
    validated."""

    status: SessionStatus
    reason: str
    at: AwareDatetime


class KernelState(BaseModel):
    """One kernel's fate, as the session knows it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    status: KernelStatus = KernelStatus.PENDING
    exit_code: int | None = None
    reason: str = ""


PENDING_KERNEL = KernelState()


def kernel_of(status: SessionStatus, exit_code: int | None, reason: str) -> KernelState:
    """What a single-kernel session's status says about its one kernel. An ERROR session's
    kernel failed to start or was lost with its node: either way nothing is left to stop."""
    if status in (S.TERMINATED, S.CANCELLED):  # a cancelled session's never ran
        return KernelState(status=KernelStatus.TERMINATED, exit_code=exit_code, reason=reason)
    if status is S.ERROR:
        return KernelState(status=KernelStatus.ERROR, reason=reason)
    if status in (S.RUNNING, S.TERMINATING):
        return KernelState(status=KernelStatus.RUNNING, reason=reason)
    return PENDING_KERNEL
