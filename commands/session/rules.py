"""The session aggregate's rules and value types: the status transition table, the errors its
commands raise, one line of the status timeline, and one kernel's state. Pure; no subjects."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import AwareDatetime, BaseModel, ConfigDict

from commands.errors import DomainError
from schemas.session import KernelStatus, SessionStatus

S = SessionStatus

# Every legal status change, in one place. Terminal statuses lead nowhere. The one way back
# to PENDING from a placed status is a requeue after node loss (``Session.requeue``, asked
# for by the session), which is not an ordinary transition and checks its own rule.
TRANSITIONS: Mapping[SessionStatus, frozenset[SessionStatus]] = {
    S.PENDING: frozenset({S.PENDING, S.SCHEDULED, S.CANCELLED, S.ERROR}),
    S.SCHEDULED: frozenset(
        {S.PULLING, S.PREPARING, S.CREATING, S.RUNNING, S.TERMINATING, S.TERMINATED, S.ERROR}
    ),
    S.PULLING: frozenset(
        {S.PREPARING, S.CREATING, S.RUNNING, S.TERMINATING, S.TERMINATED, S.ERROR}
    ),
    S.PREPARING: frozenset({S.CREATING, S.RUNNING, S.TERMINATING, S.TERMINATED, S.ERROR}),
    S.CREATING: frozenset({S.RUNNING, S.TERMINATING, S.TERMINATED, S.ERROR}),
    S.RUNNING: frozenset({S.TERMINATING, S.TERMINATED, S.ERROR}),
    S.TERMINATING: frozenset({S.TERMINATED, S.ERROR}),
    S.TERMINATED: frozenset(),
    S.CANCELLED: frozenset(),
    S.ERROR: frozenset(),
}


class InvalidPlacementError(DomainError):
    """A placement does not name exactly the session's kernels."""


class UnknownKernelError(DomainError):
    """A kernel fact names a kernel that is not part of the session."""


class StatusChange(BaseModel):
    """One line of the status timeline users see."""

    model_config = ConfigDict(frozen=True, extra="ignore")

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
