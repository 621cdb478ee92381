"""How each event of the ``session`` aggregate (``ev.session.<id>``) evolves its state: every
class pairs a catalogue event with ``apply``. ``Session`` binds them in its body, so they are
its nested event classes (``Session.Scheduled``). Pure; no subjects."""

from __future__ import annotations

from commands.aggregate import Aggregate
from commands.session.rules import KernelState
from commands.session.state import SessionState
from events.domain.session import (
    SessionAdmitted,
    SessionCancelled,
    SessionCreating,
    SessionFailed,
    SessionKernelExited,
    SessionKernelFailed,
    SessionKernelStarted,
    SessionPendingReasonChanged,
    SessionPreparing,
    SessionPulling,
    SessionRequested,
    SessionRequeued,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from schemas.session import KernelStatus, SessionStatus

S = SessionStatus


class Requested(SessionRequested, Aggregate.Created):
    def apply(self, session: SessionState) -> None:
        session.spec = self.spec
        session.kernel_ids = self.kernel_ids
        session.owner = self.owner
        session.mounts = self.mounts
        # A session from before tenancy has no scopes to reserve on.
        session.admitted = self.owner is None
        session._enter(S.PENDING, self.reason, self.timestamp)


class Admitted(SessionAdmitted, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.admitted = True
        session._enter(S.PENDING, self.reason, self.timestamp)


class PendingReasonChanged(SessionPendingReasonChanged, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session._enter(S.PENDING, self.reason, self.timestamp)


class Scheduled(SessionScheduled, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.placements = dict(self.placements)
        # Admitted and placed by one pass: its placement is its admission (no SessionAdmitted).
        session.admitted = True
        session._enter(S.SCHEDULED, self.reason, self.timestamp)


class Pulling(SessionPulling, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session._enter(S.PULLING, self.reason, self.timestamp)


class Preparing(SessionPreparing, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session._enter(S.PREPARING, self.reason, self.timestamp)


class Creating(SessionCreating, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session._enter(S.CREATING, self.reason, self.timestamp)


class Started(SessionStarted, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session._enter(S.RUNNING, self.reason, self.timestamp)


class KernelStarted(SessionKernelStarted, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.kernels[self.kernel_id] = KernelState(
            status=KernelStatus.RUNNING, reason=self.reason
        )


class KernelExited(SessionKernelExited, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.kernels[self.kernel_id] = KernelState(
            status=KernelStatus.TERMINATED, exit_code=self.exit_code, reason=self.reason
        )


class KernelFailed(SessionKernelFailed, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.kernels[self.kernel_id] = KernelState(status=KernelStatus.ERROR, reason=self.reason)


class Terminating(SessionTerminating, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.preempted_by = self.preempted_by
        # A cluster session's main kernel that exited by itself ends it as the kernel did;
        # every other Terminating was asked for, and its reason is the session's end.
        if not session.main_ended:
            session.ending = self.reason
        session._enter(S.TERMINATING, self.reason, self.timestamp)


class Terminated(SessionTerminated, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.exit_code = self.exit_code
        session._enter(S.TERMINATED, self.reason, self.timestamp)


class Requeued(SessionRequeued, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session.kernel_ids = self.kernel_ids
        session.attempt = self.attempt
        session.placements = {}
        session.kernels = {}
        session.exit_code = None
        session.ending = None
        session._enter(S.PENDING, self.reason, self.timestamp)


class Cancelled(SessionCancelled, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session._enter(S.CANCELLED, self.reason, self.timestamp)


class Failed(SessionFailed, Aggregate.Event):
    def apply(self, session: SessionState) -> None:
        session._enter(S.ERROR, self.reason, self.timestamp)
