"""The ``session`` aggregate (``ev.session.<id>``): one compute session's lifecycle, decided by
the scheduler. Agent facts (kernel started, exited, failed) arrive as commands here.

A cluster session has several kernels: kernels[0] is the main one. It runs once every kernel
has started; its result is the main kernel's exit; a sub-kernel that exits earlier is recorded
and ends nothing; a kernel that fails to start puts the session in ERROR."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.errors import IllegalTransition
from commands.session_rules import (
    PENDING_KERNEL,
    TRANSITIONS,
    InvalidPlacementError,
    KernelState,
    StatusChange,
    UnknownKernelError,
    kernel_of,
)
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
    SessionRequested,
    SessionScheduled,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from schemas.ids import kernel_id_for
from schemas.session import (
    KernelStatus,
    SessionResult,
    SessionSpec,
    SessionStatus,
    cluster_host,
    result_of,
)
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner

S = SessionStatus

__all__ = [
    "TRANSITIONS",
    "InvalidPlacementError",
    "KernelState",
    "Session",
    "StatusChange",
    "UnknownKernelError",
]


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
        kernels: dict[str, KernelState] = {}

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
        self.kernels: dict[str, KernelState] = {}
        """Kernel id -> its fate, in a multi-kernel session (no entry: not started)."""

    @property
    def reason(self) -> str:
        """Why the session is in its current status."""
        return self.history[-1].reason

    @property
    def main_kernel(self) -> str:
        return self.kernel_ids[0]

    def kernel(self, kernel_id: str) -> KernelState:
        """One kernel's fate. A single-kernel session's one kernel does what the session
        does (it writes no kernel events)."""
        if self._single:
            return kernel_of(self.status, self.exit_code, self.reason)
        return self.kernels.get(kernel_id, PENDING_KERNEL)

    @property
    def result(self) -> SessionResult | None:
        """success (exit code 0), failure (another exit code, or ERROR); None while running,
        when cancelled, or when it ended with no exit code."""
        return result_of(self.status, self.exit_code)

    @property
    def started_at(self) -> datetime | None:
        """When it first ran (all its kernels had started)."""
        return next((h.at for h in self.history if h.status is S.RUNNING), None)

    @property
    def timeout_at(self) -> datetime | None:
        """When a batch session with a timeout is stopped: its start plus ``timeout_s``."""
        started, timeout_s = self.started_at, self.spec.timeout_s
        if started is None or timeout_s is None:
            return None
        return started + timedelta(seconds=timeout_s)

    def kernels_to_stop(self) -> tuple[str, ...]:
        """Once the session is ending or over: its placed kernels that have not ended, whose
        node ledgers must ask their agents to stop them. Empty before that."""
        if self.status is not S.TERMINATING and not self.status.is_terminal:
            return ()
        return tuple(
            k
            for k in self.kernel_ids
            if k in self.placements and not self.kernel(k).status.has_ended
        )

    @property
    def _single(self) -> bool:
        # A single-kernel session writes no kernel events: its status events say it all.
        return len(self.kernel_ids) == 1

    def _host(self, kernel_id: str) -> str:
        return cluster_host(self.kernel_ids.index(kernel_id))

    def _all_ended_with(self, kernel_id: str) -> bool:
        """Every kernel has ended once ``kernel_id`` has."""
        return all(self.kernel(k).status.has_ended for k in self.kernel_ids if k != kernel_id)

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
        """RUNNING once every kernel has started (SessionStarted once)."""
        self._check_kernel(kernel_id, S.RUNNING)
        if self.status in (S.RUNNING, S.TERMINATING) or self.status.is_terminal:
            return False  # a terminating session stays terminating
        if self._single:
            return self._change(S.RUNNING, self.Started, now, reason=reason)
        if self.kernel(kernel_id).status is not KernelStatus.PENDING:
            return False
        self._check(S.RUNNING)
        self._trigger(self.KernelStarted, now, kernel_id=kernel_id, reason=reason)
        if all(self.kernel(k).status is not KernelStatus.PENDING for k in self.kernel_ids):
            started = f"all {len(self.kernel_ids)} kernels started"
            self._change(S.RUNNING, self.Started, now, reason=started)
        return True

    def kernel_exited(self, kernel_id: str, exit_code: int, reason: str, now: datetime) -> bool:
        """The main kernel's exit ends the session with its exit code (TERMINATING until the
        other kernels are gone); a sub-kernel's is recorded and ends nothing by itself."""
        self._check_kernel(kernel_id, S.TERMINATED)
        if self._single:
            return self.mark_terminated(reason, now, exit_code=exit_code)
        return self._kernel_ended(kernel_id, exit_code, reason, now)

    def kernel_stopped(self, kernel_id: str, reason: str, now: datetime) -> bool:
        """A kernel of an ending session was stopped before it started: no exit code, and not
        an error (the end was asked for). The session ends once every kernel has."""
        self._check_kernel(kernel_id, S.TERMINATED)
        if self._single:
            return self.mark_terminated(reason, now)
        return self._kernel_ended(kernel_id, None, reason, now)

    def kernel_failed(self, kernel_id: str, reason: str, now: datetime) -> bool:
        """A kernel failed to start: the session goes to ERROR, and the scheduler stops the
        others (``kernels_to_stop``)."""
        self._check_kernel(kernel_id, S.ERROR)
        if self._single:
            return self.fail(reason, now)
        if self.kernel(kernel_id).status.has_ended or not self._may_record(kernel_id):
            return False
        ending = not self.status.is_terminal
        if ending:
            self._check(S.ERROR)
        self._trigger(self.KernelFailed, now, kernel_id=kernel_id, reason=reason)
        if ending:
            self._change(S.ERROR, self.Failed, now, reason=f"{self._host(kernel_id)}: {reason}")
        return True

    def time_out(self, now: datetime) -> bool:
        """Stop a RUNNING batch session whose ``timeout_at`` has come; otherwise nothing."""
        deadline = self.timeout_at
        if deadline is None or now < deadline or self.status is not S.RUNNING:
            return False
        reason = f"timed out after {self.spec.timeout_s}s"
        return self._change(S.TERMINATING, self.Terminating, now, reason=reason)

    def _kernel_ended(
        self, kernel_id: str, exit_code: int | None, reason: str, now: datetime
    ) -> bool:
        if self.kernel(kernel_id).status.has_ended or not self._may_record(kernel_id):
            return False
        target: SessionStatus | None = None
        if self.status.is_terminal:
            pass  # only the kernel's fate is left to record
        elif self._all_ended_with(kernel_id):
            target = S.TERMINATED
        elif kernel_id == self.main_kernel and self.status is not S.TERMINATING:
            target = S.TERMINATING
        if target is not None:
            self._check(target)  # an illegal change refuses before anything is recorded
        self._trigger(
            self.KernelExited, now, kernel_id=kernel_id, exit_code=exit_code, reason=reason
        )
        main = self.kernel(self.main_kernel)
        if target is S.TERMINATED:
            # The result is the main kernel's, whichever kernel ended last.
            ended = f"{cluster_host(0)}: {main.reason}"
            self._change(S.TERMINATED, self.Terminated, now, reason=ended, exit_code=main.exit_code)
        elif target is S.TERMINATING:
            stopping = f"{cluster_host(0)}: {reason}"
            self._change(S.TERMINATING, self.Terminating, now, reason=stopping)
        return True

    def _may_record(self, kernel_id: str) -> bool:
        # After the end, only a placed kernel's fate is still worth recording (it was to be
        # stopped); a cancelled session never had kernels.
        return not self.status.is_terminal or kernel_id in self.placements

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

    class KernelStarted(SessionKernelStarted, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session.kernels[self.kernel_id] = KernelState(
                status=KernelStatus.RUNNING, reason=self.reason
            )

    class KernelExited(SessionKernelExited, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session.kernels[self.kernel_id] = KernelState(
                status=KernelStatus.TERMINATED, exit_code=self.exit_code, reason=self.reason
            )

    class KernelFailed(SessionKernelFailed, Aggregate.Event):
        def apply(self, session: Session) -> None:
            session.kernels[self.kernel_id] = KernelState(
                status=KernelStatus.ERROR, reason=self.reason
            )

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
