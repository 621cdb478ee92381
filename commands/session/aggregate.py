"""The ``session`` aggregate (``ev.session.<id>``): one compute session's lifecycle, decided by
the scheduler. Agent facts (kernel started, exited, failed) arrive as commands here.

A cluster session has several kernels: kernels[0] is the main one. It runs once every kernel
has started; its result is the main kernel's exit; a sub-kernel that exits earlier is recorded
and ends nothing; a kernel that fails to start puts the session in ERROR.

This module decides; the attributes and queries are ``commands.session.state``'s, the events and
how each evolves a session ``commands.session.events``'s, the transition table
``commands.session.rules``'s."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from commands.aggregate import Aggregate
from commands.errors import IllegalTransition
from commands.session import events
from commands.session.rules import (
    TRANSITIONS,
    InvalidPlacementError,
    UnknownKernelError,
)
from commands.session.state import SessionSnapshot, SessionState
from schemas.fair_share import FairShareStanding
from schemas.ids import derived_id, kernel_id_for
from schemas.session import (
    MAX_REQUEUES,
    KernelStatus,
    SessionSpec,
    SessionStatus,
    cluster_host,
)
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from schemas.vfolder import Mount

S = SessionStatus


class Session(SessionState, Aggregate):
    aggregate_type = AggregateType.SESSION

    State = SessionSnapshot

    def __init__(self) -> None:
        # Here, not inherited: the library makes every aggregate a dataclass, which would
        # give one without its own ``__init__`` an empty one.
        super().__init__()

    # ---- commands ------------------------------------------------------------------------

    @classmethod
    def request(
        cls,
        session_id: str,
        spec: SessionSpec,
        now: datetime,
        owner: SessionOwner | None = None,
        mounts: tuple[Mount, ...] = (),
    ) -> Session:
        """A new PENDING session; ``mounts``: its folders, as the scheduler resolved them."""
        kernel_ids = tuple(kernel_id_for(session_id, i) for i in range(len(spec.kernels)))
        return cls._create(
            cls.Requested,
            id=session_id,
            timestamp=now,
            spec=spec,
            kernel_ids=kernel_ids,
            owner=owner,
            mounts=tuple(mounts),
        )

    def admit(self, reason: str, now: datetime) -> bool:
        """Its slots are now reserved on every scope. Admitting again changes nothing."""
        self._check(S.PENDING)
        if self.admitted:
            return False
        return self._trigger(self.Admitted, now, reason=reason)

    def note_pending_reason(
        self, reason: str, now: datetime, *, fair_share: FairShareStanding | None = None
    ) -> bool:
        """Record why a session still waits; only a changed reason is written (a fair-share
        standing is said in the reason, so it changes with it)."""
        self._check(S.PENDING)
        if reason == self.reason:
            return False
        if fair_share is None:
            return self._change(S.PENDING, self.PendingReasonChanged, now, reason=reason)
        return self._change(
            S.PENDING, self.PendingReasonChanged, now, reason=reason, fair_share=fair_share
        )

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

    def begin_pulling(self, reason: str, now: datetime) -> bool:
        """A node pulls its image: SCHEDULED becomes PULLING (once; later pulls for its other
        kernels, or a pull started again after an agent's restart, change nothing)."""
        if self.status is not S.SCHEDULED:
            return False
        return self._change(S.PULLING, self.Pulling, now, reason=reason)

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

    def requeue(self, reason: str, now: datetime) -> bool:
        """Its node was lost: a batch session that asked for it (and has requeues left) waits
        to be placed again with new kernels; its slots stay reserved. Otherwise nothing
        (the caller ends it). A session asked to end, or ended, is not requeued."""
        spec = self.spec
        if (
            not spec.requeue_on_node_loss
            or self.attempt >= MAX_REQUEUES
            or not self.status.is_placed
        ):
            return False
        attempt = self.attempt + 1
        kernel_ids = tuple(
            derived_id("kernel", self.id, str(i), f"attempt-{attempt}")
            for i in range(len(spec.kernels))
        )
        return self._trigger(
            self.Requeued, now, reason=reason, kernel_ids=kernel_ids, attempt=attempt
        )

    def preempt(self, by: str, reason: str, now: datetime) -> bool:
        """Stop a placed session to make room for the waiting session ``by``: it terminates,
        and its end keeps ``reason`` (which names ``by``) whatever its kernels report."""
        if not self.status.is_placed:
            return False
        return self._change(S.TERMINATING, self.Terminating, now, reason=reason, preempted_by=by)

    def mark_terminated(self, reason: str, now: datetime, exit_code: int | None = None) -> bool:
        """The session is over (its kernel is gone). Idempotent once the session has ended.
        A session asked to end (terminated, timed out, preempted) keeps why as its final
        reason; how its kernel ended is its exit code."""
        if self.status.is_terminal:
            return False
        asked = self.ending is not None
        reason = self.ending or reason
        return self._change(
            S.TERMINATED, self.Terminated, now, reason=reason, exit_code=exit_code, asked=asked
        )

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
            # The result is the main kernel's, whichever kernel ended last; an end asked for
            # keeps its cause.
            ended = self.ending or f"{cluster_host(0)}: {main.reason}"
            self._change(
                S.TERMINATED, self.Terminated, now, reason=ended, exit_code=main.exit_code,
                asked=self.ending is not None,
            )  # fmt: skip
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

    # ---- events (``commands.session.events``) --------------------------------------------

    Requested = events.Requested
    Admitted = events.Admitted
    PendingReasonChanged = events.PendingReasonChanged
    Scheduled = events.Scheduled
    Pulling = events.Pulling
    Preparing = events.Preparing
    Creating = events.Creating
    Started = events.Started
    KernelStarted = events.KernelStarted
    KernelExited = events.KernelExited
    KernelFailed = events.KernelFailed
    Terminating = events.Terminating
    Terminated = events.Terminated
    Requeued = events.Requeued
    Cancelled = events.Cancelled
    Failed = events.Failed
