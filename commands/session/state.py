"""What a session is and what its state says: the attributes its events evolve, and the
queries the scheduler and the decisions ask (reason, kernels, result, deadline, kernels to
stop). The base of the ``Session`` aggregate, which decides; ``commands.session.events``
evolves it. Pure; no subjects."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from commands.session.rules import PENDING_KERNEL, KernelState, StatusChange, kernel_of
from schemas.session import SessionResult, SessionSpec, SessionStatus, cluster_host, result_of
from schemas.tenancy import SessionOwner
from schemas.vfolder import Mount

S = SessionStatus


class SessionSnapshot(BaseModel):
    """A session's attributes in a snapshot (``Session.State``): exactly those
    ``SessionState.__init__`` sets."""

    spec: SessionSpec
    kernel_ids: tuple[str, ...]
    status: SessionStatus
    placements: dict[str, str]
    exit_code: int | None
    history: list[StatusChange]
    owner: SessionOwner | None = None
    admitted: bool = False
    kernels: dict[str, KernelState] = {}
    preempted_by: str | None = None
    attempt: int = 0
    mounts: tuple[Mount, ...] = ()
    ending: str | None = None


class SessionState:
    """A session's attributes and the queries on them; ``Session.State`` snapshots them."""

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
        self.preempted_by: str | None = None
        """The session it was stopped to make room for (preemption)."""
        self.attempt = 0
        """How often it was requeued after losing its node (its kernels are new each time)."""
        self.mounts: tuple[Mount, ...] = ()
        """The folders it mounts, as resolved when it was requested (kept across requeues)."""
        self.ending: str | None = None
        """Why it was asked to end (terminated by someone, idle timeout, lifetime, timeout,
        preempted, drained), once it was: its final reason, whatever its kernels report
        after (a stopped kernel exits 143). None while it ends by itself."""

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
        """When it ran (all its kernels had started); after a requeue, when it ran again."""
        return next((h.at for h in reversed(self.history) if h.status is S.RUNNING), None)

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
    def main_ended(self) -> bool:
        """A cluster session's main kernel has ended (a single kernel's end is its session's)."""
        return not self._single and self.kernel(self.main_kernel).status.has_ended

    @property
    def _single(self) -> bool:
        # A single-kernel session writes no kernel events: its status events say it all.
        return len(self.kernel_ids) == 1

    def _host(self, kernel_id: str) -> str:
        return cluster_host(self.kernel_ids.index(kernel_id))

    def _all_ended_with(self, kernel_id: str) -> bool:
        """Every kernel has ended once ``kernel_id`` has."""
        return all(self.kernel(k).status.has_ended for k in self.kernel_ids if k != kernel_id)

    def _enter(self, status: SessionStatus, reason: str, at: datetime) -> None:
        self.status = status
        self.history.append(StatusChange(status, reason, at))
