"""The ``session`` aggregate (``ev.session.<id>``): one compute session's lifecycle, decided by
the scheduler. Agent facts (kernel started, exited, failed) arrive as commands here."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict

from commands.aggregate import Aggregate
from commands.errors import DomainError, IllegalTransition
from events.domain.session import (
    SessionAdmitted,
    SessionCancelled,
    SessionCreating,
    SessionFailed,
    SessionPendingReasonChanged,
    SessionPreparing,
    SessionRequested,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from schemas.ids import kernel_id_for
from schemas.session import SessionSpec, SessionStatus
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner

S = SessionStatus

# Every legal status change, in one place. Terminal statuses lead nowhere.
TRANSITIONS: Mapping[SessionStatus, frozenset[SessionStatus]] = {
    S.PENDING: frozenset({S.PENDING, S.SCHEDULED, S.CANCELLED, S.ERROR}),
    S.SCHEDULED: frozenset(
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


class Session(Aggregate):
    aggregate_type = AggregateType.SESSION

    class State(BaseModel):
        spec: SessionSpec
        kernel_ids: tuple[str, ...]
        status: SessionStatus
        placements: dict[str, str]
        exit_code: int | None
        history: list[StatusChange]
        owner: SessionOwner | None = None
        admitted: bool = False

    def __init__(self) -> None:
        # Filled by ``Requested.apply``; a session exists only from its first event.
        self.spec: SessionSpec
        self.kernel_ids: tuple[str, ...] = ()
        self.status = SessionStatus.PENDING
        self.placements: dict[str, str] = {}
        self.exit_code: int | None = None
        self.history: list[StatusChange] = []
        self.owner: SessionOwner | None = None
        self.admitted = False
        """Its slots are reserved on every quota scope; only admitted sessions are placed."""

    @property
    def reason(self) -> str:
        """Why the session is in its current status."""
        return self.history[-1].reason

    # ---- commands ------------------------------------------------------------------------

    @classmethod
    def request(
        cls,
        session_id: str,
        spec: SessionSpec,
        now: datetime,
        owner: SessionOwner | None = None,
    ) -> Session:
        kernel_ids = tuple(kernel_id_for(session_id, i) for i in range(len(spec.kernels)))
        return cls._create(
            cls.Requested,
            id=session_id,
            timestamp=now,
            spec=spec,
            kernel_ids=kernel_ids,
            owner=owner,
        )

    def admit(self, reason: str, now: datetime) -> bool:
        """Its slots are now reserved on every scope. Admitting again changes nothing."""
        self._check(S.PENDING)
        if self.admitted:
            return False
        return self._trigger(self.Admitted, now, reason=reason)

    def note_pending_reason(self, reason: str, now: datetime) -> bool:
        """Record why a session still waits; only a changed reason is written."""
        self._check(S.PENDING)
        if reason == self.reason:
            return False
        return self._change(S.PENDING, self.PendingReasonChanged, now, reason=reason)

    def schedule(self, placements: Mapping[str, str], reason: str, now: datetime) -> bool:
        self._check(S.SCHEDULED)  # an illegal transition is the first thing to say
        if set(placements) != set(self.kernel_ids):
            raise InvalidPlacementError(
                f"session {self.id}: placements name {sorted(placements)}, "
                f"the kernels are {list(self.kernel_ids)}"
            )
        return self._change(
            S.SCHEDULED, self.Scheduled, now, placements=dict(placements), reason=reason
        )

    def begin_preparing(self, reason: str, now: datetime) -> bool:
        return self._change(S.PREPARING, self.Preparing, now, reason=reason)

    def begin_creating(self, reason: str, now: datetime) -> bool:
        return self._change(S.CREATING, self.Creating, now, reason=reason)

    def terminate(self, reason: str, now: datetime) -> bool:
        """Ask the session to end: a PENDING one is cancelled at once (nothing was allocated),
        a placed one starts terminating. Asking again, or after the end, changes nothing."""
        if self.status is S.PENDING:
            return self._change(S.CANCELLED, self.Cancelled, now, reason=reason)
        if self.status is S.TERMINATING or self.status.is_terminal:
            return False
        return self._change(S.TERMINATING, self.Terminating, now, reason=reason)

    def mark_terminated(self, reason: str, now: datetime, exit_code: int | None = None) -> bool:
        """The session is over (its kernel is gone). Idempotent once the session has ended."""
        if self.status.is_terminal:
            return False
        return self._change(S.TERMINATED, self.Terminated, now, reason=reason, exit_code=exit_code)

    def fail(self, reason: str, now: datetime) -> bool:
        """The session cannot run. Idempotent once the session has ended."""
        if self.status.is_terminal:
            return False
        return self._change(S.ERROR, self.Failed, now, reason=reason)

    # ---- agent facts ---------------------------------------------------------------------
    # Facts already happened: late or repeated ones change nothing rather than fail, because
    # the agent reconciles its containers with the node ledger, not with the session.

    def kernel_started(self, kernel_id: str, now: datetime, reason: str = "kernel started") -> bool:
        self._check_kernel(kernel_id, S.RUNNING)
        if self.status in (S.RUNNING, S.TERMINATING) or self.status.is_terminal:
            return False  # a terminating session stays terminating
        return self._change(S.RUNNING, self.Started, now, reason=reason)

    def kernel_exited(self, kernel_id: str, exit_code: int, reason: str, now: datetime) -> bool:
        # One kernel per session for now (MAX_KERNELS): its exit ends the session.
        self._check_kernel(kernel_id, S.TERMINATED)
        return self.mark_terminated(reason, now, exit_code=exit_code)

    def kernel_failed(self, kernel_id: str, reason: str, now: datetime) -> bool:
        self._check_kernel(kernel_id, S.ERROR)
        return self.fail(reason, now)

    # ---- rules ---------------------------------------------------------------------------

    def _change(
        self,
        target: SessionStatus,
        event_class: type[Aggregate.Event],
        now: datetime,
        **fields: Any,
    ) -> bool:
        """Every status change goes through here, so the table is the only authority."""
        self._check(target)
        return self._trigger(event_class, now, **fields)

    def _check(self, target: SessionStatus) -> None:
        if target not in TRANSITIONS[self.status]:
            raise IllegalTransition(f"session {self.id}", self.status, target)

    def _check_kernel(self, kernel_id: str, target: SessionStatus) -> None:
        if kernel_id not in self.kernel_ids:
            raise UnknownKernelError(f"session {self.id} has no kernel {kernel_id}")
        if self.status is S.PENDING:  # no kernel of an unplaced session can have a fact
            raise IllegalTransition(f"session {self.id}", self.status, target)

    def _enter(self, status: SessionStatus, reason: str, at: datetime) -> None:
        self.status = status
        self.history.append(StatusChange(status=status, reason=reason, at=at))

    # ---- events --------------------------------------------------------------------------

    class Requested(SessionRequested, Aggregate.Created):
        def apply(self, session: Session) -> None:
            session.spec = self.spec
            session.kernel_ids = self.kernel_ids
            session.owner = self.owner
            # A session from before tenancy has no scopes to reserve on.
            session.admitted = self.owner is None
            session._enter(S.PENDING, self.reason, self.timestamp)

    class Admitted(SessionAdmitted, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session.admitted = True
            session._enter(S.PENDING, self.reason, self.timestamp)

    class PendingReasonChanged(SessionPendingReasonChanged, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session._enter(S.PENDING, self.reason, self.timestamp)

    class Scheduled(SessionScheduled, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session.placements = dict(self.placements)
            session._enter(S.SCHEDULED, self.reason, self.timestamp)

    class Preparing(SessionPreparing, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session._enter(S.PREPARING, self.reason, self.timestamp)

    class Creating(SessionCreating, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session._enter(S.CREATING, self.reason, self.timestamp)

    class Started(SessionStarted, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session._enter(S.RUNNING, self.reason, self.timestamp)

    class Terminating(SessionTerminating, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session._enter(S.TERMINATING, self.reason, self.timestamp)

    class Terminated(SessionTerminated, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session.exit_code = self.exit_code
            session._enter(S.TERMINATED, self.reason, self.timestamp)

    class Cancelled(SessionCancelled, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session._enter(S.CANCELLED, self.reason, self.timestamp)

    class Failed(SessionFailed, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session._enter(S.ERROR, self.reason, self.timestamp)
