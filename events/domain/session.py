"""Events of the ``session`` aggregate (``ev.session.<id>``), written only by the scheduler.

Every status change carries a ``reason``: the status timeline users see is built from them.
The ``SessionKernel*`` events record one kernel's fate in a multi-kernel (cluster) session and
change no status by themselves; a single-kernel session writes none (its status events say what
its one kernel did).
"""

from __future__ import annotations

from events.catalogue import Event, event
from schemas.fair_share import FairShareStanding
from schemas.session import SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from schemas.vfolder import Mount

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
    mounts: tuple[Mount, ...] = ()
    """The virtual folders it mounts, resolved when it was created (the spec's requests and
    the owner's dot-folders): kept across requeues, carried to each kernel's allocation."""


@event("SessionAdmitted", SESSION)
class SessionAdmitted(Event):
    """Still PENDING, now with its slots reserved on every scope it belongs to (written with
    the ``QuotaReserved`` events): the scheduler may place it. Only for a session a pass
    admits and does not place: one admitted and placed at once is admitted by its
    ``SessionScheduled``."""

    reason: str = "admitted"


@event("SessionPendingReasonChanged", SESSION)
class SessionPendingReasonChanged(Event):
    """Still PENDING, for a different reason (e.g. "fits nowhere: gpu"). Written only when the
    reason changes, so a waiting session does not fill the log."""

    reason: str
    fair_share: FairShareStanding | None = None
    """In a fair-share group: its owner's factors as the pass ordered the queue (rounded, as
    the reason says them). None elsewhere, and in events written before fair share."""


@event("SessionScheduled", SESSION)
class SessionScheduled(Event):
    """Placed: every kernel has a node (kernel id -> node id). The node ledgers hold the
    matching allocations, written in the same decision pass. A session not admitted yet is
    admitted by it: its reservations (``QuotaReserved``) are stored in the same batch."""

    placements: dict[str, str]
    reason: str


@event("SessionPulling", SESSION)
class SessionPulling(Event):
    """PULLING: a node it was placed on is pulling its image (``reason`` names the image and
    the node). It goes RUNNING once its kernels start, or ends if the pull fails."""

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
    """RUNNING: the agent reported its kernel started (every kernel, in a cluster session)."""

    reason: str


@event("SessionKernelStarted", SESSION)
class SessionKernelStarted(Event):
    """One kernel of a multi-kernel session started; ``SessionStarted`` follows the last."""

    kernel_id: str
    reason: str = "kernel started"


@event("SessionKernelExited", SESSION)
class SessionKernelExited(Event):
    """One kernel of a multi-kernel session ended: exited with its exit code, or stopped before
    it started (``exit_code`` null). The main kernel's exit ends the session; a sub-kernel's
    does not."""

    kernel_id: str
    exit_code: int | None = None
    reason: str


@event("SessionKernelFailed", SESSION)
class SessionKernelFailed(Event):
    """One kernel of a multi-kernel session failed to start; ``SessionFailed`` follows unless
    the session had already ended."""

    kernel_id: str
    reason: str


@event("SessionTerminating", SESSION)
class SessionTerminating(Event):
    """Termination was asked for (or the main kernel exited, or a batch session timed out, or
    it was preempted); the session ends when its kernels are gone."""

    reason: str
    preempted_by: str | None = None
    """The waiting session it makes room for, when it was preempted."""


@event("SessionTerminated", SESSION)
class SessionTerminated(Event):
    """TERMINATED: the kernel exited (with its exit code) or was stopped before it started. In
    a cluster session: every kernel has ended, and the exit code is the main kernel's."""

    reason: str
    exit_code: int | None = None
    asked: bool = False
    """Its end was asked for (terminate, an idle or lifetime limit, a timeout, preemption, a
    drain) before its main kernel ended by itself: ``reason`` is that cause. False in events
    written before it was recorded."""


@event("SessionRequeued", SESSION)
class SessionRequeued(Event):
    """→ PENDING again: a node it ran on was lost and it asked to be requeued
    (``requeue_on_node_loss``). Its new kernels (``kernel_ids``) are placed like a new
    session's; its slots stay reserved on its quota scopes; its old kernels are forgotten."""

    reason: str
    kernel_ids: tuple[str, ...]
    attempt: int
    """1 for the first requeue, and so on."""


@event("SessionCancelled", SESSION)
class SessionCancelled(Event):
    """CANCELLED: ended while PENDING, before any resources were allocated."""

    reason: str


@event("SessionFailed", SESSION)
class SessionFailed(Event):
    """ERROR: the session cannot run (kernel failed to start, node lost, never fits)."""

    reason: str
