"""Events of the ``session`` aggregate (``ev.session.<id>``), written only by the scheduler.

Every status change carries a ``reason``: the status timeline users see is built from them.
"""

from __future__ import annotations

from events.catalogue import Event, event
from schemas.session import SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner

SESSION = AggregateType.SESSION


@event("SessionRequested", SESSION)
class SessionRequested(Event):
    """A session was asked for and is PENDING. Kernel ids derive from the session id, so the
    list is final from the first event (multi-kernel sessions need no upcaster later)."""

    spec: SessionSpec
    kernel_ids: tuple[str, ...]
    reason: str = "requested"
    owner: SessionOwner | None = None
    """The scopes its slots are reserved on. None only in logs older than tenancy: such a
    session is admitted without a quota check."""


@event("SessionAdmitted", SESSION)
class SessionAdmitted(Event):
    """Still PENDING, now with its slots reserved on every scope it belongs to (written with
    the ``QuotaReserved`` events): the scheduler may place it."""

    reason: str = "admitted"


@event("SessionPendingReasonChanged", SESSION)
class SessionPendingReasonChanged(Event):
    """Still PENDING, for a different reason (e.g. "fits nowhere: gpu"). Written only when the
    reason changes, so a waiting session does not fill the log."""

    reason: str


@event("SessionScheduled", SESSION)
class SessionScheduled(Event):
    """Placed: every kernel has a node (kernel id -> node id). The node ledgers hold the
    matching allocations, written in the same decision pass."""

    placements: dict[str, str]
    reason: str


@event("SessionPreparing", SESSION)
class SessionPreparing(Event):
    """The agent is getting ready (pulling images, preparing mounts)."""

    reason: str


@event("SessionCreating", SESSION)
class SessionCreating(Event):
    """The agent is creating the containers."""

    reason: str


@event("SessionStarted", SESSION)
class SessionStarted(Event):
    """RUNNING: the agent reported its kernel started."""

    reason: str


@event("SessionTerminating", SESSION)
class SessionTerminating(Event):
    """Termination was asked for; the session ends when its kernel is gone."""

    reason: str


@event("SessionTerminated", SESSION)
class SessionTerminated(Event):
    """TERMINATED: the kernel exited (with its exit code) or was stopped before it started."""

    reason: str
    exit_code: int | None = None


@event("SessionCancelled", SESSION)
class SessionCancelled(Event):
    """CANCELLED: ended while PENDING, before any resources were allocated."""

    reason: str


@event("SessionFailed", SESSION)
class SessionFailed(Event):
    """ERROR: the session cannot run (kernel failed to start, node lost, never fits)."""

    reason: str
