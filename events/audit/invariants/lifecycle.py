"""Every session's statuses replayed against the transition table the aggregate decides by
(``schemas.session.TRANSITIONS``). Reads ``ev.session.*``. Pure.

Rule ``transition``, at the event that breaks it:

- a status event whose status the table does not allow after the session's current one (a
  second ``SessionScheduled`` for one placement, anything after an end);
- ``SessionRequeued`` (back to PENDING after node loss) from a status that is not placed;
- a session's first event other than ``SessionRequested``, or a second ``SessionRequested``;
- a kernel fact (``SessionKernel*``) while the session is PENDING, or naming a kernel that is
  not one of the session's current attempt.

The statuses each event sets are those of ``commands.session.events`` (which this layer may
not import); ``tests/unit/test_invariants.py`` checks the two agree.
"""

from __future__ import annotations

from collections.abc import Callable

from events.audit.invariants.ledgers import Payload
from events.audit.invariants.report import InvariantReport
from schemas.session import PLACED_STATUSES, TRANSITIONS, SessionStatus

S = SessionStatus
STATUS_OF: dict[str, SessionStatus] = {
    "SessionAdmitted": S.PENDING,
    "SessionPendingReasonChanged": S.PENDING,
    "SessionScheduled": S.SCHEDULED,
    "SessionPulling": S.PULLING,
    "SessionPreparing": S.PREPARING,
    "SessionCreating": S.CREATING,
    "SessionStarted": S.RUNNING,
    "SessionTerminating": S.TERMINATING,
    "SessionTerminated": S.TERMINATED,
    "SessionCancelled": S.CANCELLED,
    "SessionFailed": S.ERROR,
}
"""The status each status event of a requested session enters."""
KERNEL_FACTS = ("SessionKernelStarted", "SessionKernelExited", "SessionKernelFailed")


class Lifecycle:
    def __init__(self, report: InvariantReport) -> None:
        self._report = report
        self.status: dict[str, SessionStatus] = {}
        self._kernels: dict[str, frozenset[str]] = {}
        """Session id -> the kernel ids of its current attempt."""

    def handlers(self) -> dict[str, Callable[[int, str, Payload], None]]:
        found: dict[str, Callable[[int, str, Payload], None]] = {
            name: self._entering(status) for name, status in STATUS_OF.items()
        }
        found["SessionRequested"] = self._requested
        found["SessionRequeued"] = self._requeued
        found.update(dict.fromkeys(KERNEL_FACTS, self._kernel_fact))
        return found

    def ended(self, session_id: str) -> bool:
        status = self.status.get(session_id)
        return status is not None and status.is_terminal

    def _illegal(self, seq: int, sid: str, text: str) -> None:
        self._report.add(seq, "transition", f"session {sid}: {text}")

    def _requested(self, seq: int, sid: str, payload: Payload) -> None:
        current = self.status.get(sid)
        if current is not None:
            self._illegal(seq, sid, f"requested again while {current.value}")
            return
        self.status[sid] = S.PENDING
        self._kernels[sid] = frozenset(payload.get("kernel_ids", ()))

    def _entering(self, target: SessionStatus) -> Callable[[int, str, Payload], None]:
        def enter(seq: int, sid: str, payload: Payload) -> None:
            current = self.status.get(sid)
            if current is None:
                self._illegal(seq, sid, f"{target.value} before it was requested")
            elif target not in TRANSITIONS[current]:
                self._illegal(seq, sid, f"{current.value} -> {target.value} is not a transition")
            self.status[sid] = target

        return enter

    def _requeued(self, seq: int, sid: str, payload: Payload) -> None:
        current = self.status.get(sid)
        if current not in PLACED_STATUSES:
            was = "not requested" if current is None else current.value
            self._illegal(seq, sid, f"requeued while not placed ({was})")
        self.status[sid] = S.PENDING
        self._kernels[sid] = frozenset(payload.get("kernel_ids", ()))

    def _kernel_fact(self, seq: int, sid: str, payload: Payload) -> None:
        current, kernel = self.status.get(sid), payload["kernel_id"]
        if current is None or current is S.PENDING:
            was = "not requested" if current is None else "PENDING"
            self._illegal(seq, sid, f"a fact of kernel {kernel} while {was}")
        elif kernel not in self._kernels.get(sid, frozenset()):
            self._illegal(seq, sid, f"a fact of kernel {kernel}, not one of its kernels")
