"""The sessions' side of allocation, replayed against the node ledgers (``ledgers``): what was
placed is what was allocated, preemption stops only for a waiting session of higher priority,
and (once settled) nothing is held for a session that ended. Reads ``ev.session.*`` and the
agents' ``KernelStarted`` (``ev.agent.*``). Pure.

Rules:

- ``placement`` (at the end, where the whole log shows it): a placement that does not name the
  attempt's kernels, a kernel placed and never allocated, an allocation on another node or
  for another session than its placement, or of other slots than the kernel asked for, an
  allocation no placement names;
- ``kernel-start``: a kernel started on a node that never held it;
- ``preemption``: a session preempted for one that is unknown, already placed or ended, or of
  a priority not above its own;
- ``not-given-back`` (``settled``): an allocation still held after its session ended.

Twice-scheduled and requeued-while-not-placed sessions break the status transitions and are
``lifecycle``'s to report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from events.audit.invariants.ledgers import Ledgers, Payload, Slots, slots_of
from events.audit.invariants.report import InvariantReport

ENDED = frozenset({"SessionTerminated", "SessionCancelled", "SessionFailed"})
DEFAULT_PRIORITY = 10


@dataclass(slots=True)
class SessionSeen:
    kernels: dict[str, Slots | None] = field(default_factory=dict)
    """Kernel id -> the slots it asked for (None where the spec does not say per kernel)."""
    placements: list[dict[str, str]] = field(default_factory=list)
    """One entry per ``SessionScheduled``."""
    attempts: list[set[str]] = field(default_factory=list)
    """The kernel ids of each attempt: the request's, then each requeue's."""
    ended: bool = False
    priority: int = DEFAULT_PRIORITY


class Placements:
    def __init__(self, report: InvariantReport) -> None:
        self._report = report
        self.sessions: dict[str, SessionSeen] = {}

    def ended(self, session_id: str) -> bool:
        seen = self.sessions.get(session_id)
        return seen is not None and seen.ended

    def handlers(self, ledgers: Ledgers) -> dict[str, Callable[[int, str, Payload], None]]:
        def kernel_started(seq: int, agent: str, payload: Payload) -> None:
            self._report.started += 1
            kernel = payload["kernel_id"]
            if not any(h.node == agent for h in ledgers.ever.get(kernel, [])):
                text = f"kernel {kernel} started on node {agent}, which never held it"
                self._report.add(seq, "kernel-start", text)

        return {
            "SessionRequested": self._requested,
            "SessionScheduled": self._scheduled,
            "SessionTerminating": self._terminating,
            "SessionRequeued": self._requeued,
            **dict.fromkeys(ENDED, self._ended),
            "KernelStarted": kernel_started,
        }

    def _requested(self, seq: int, sid: str, payload: Payload) -> None:
        kernel_ids = list(payload.get("kernel_ids", []))
        spec = payload.get("spec") or {}
        specs = spec.get("kernels", [])
        same = len(specs) == len(kernel_ids)
        self.sessions[sid] = SessionSeen(
            kernels={
                k: slots_of(specs[i].get("resources")) if same else None
                for i, k in enumerate(kernel_ids)
            },
            priority=int(spec.get("priority", DEFAULT_PRIORITY)),
            attempts=[set(kernel_ids)],
        )

    def _scheduled(self, seq: int, sid: str, payload: Payload) -> None:
        session = self.sessions.setdefault(sid, SessionSeen())
        session.placements.append(dict(payload.get("placements", {})))

    def _requeued(self, seq: int, sid: str, payload: Payload) -> None:
        self._report.requeued += 1
        session = self.sessions.setdefault(sid, SessionSeen())
        kernel_ids = list(payload.get("kernel_ids", []))
        asked = list(session.kernels.values())[: len(kernel_ids)]
        same = len(asked) == len(kernel_ids)
        session.kernels.update({k: asked[i] if same else None for i, k in enumerate(kernel_ids)})
        session.attempts.append(set(kernel_ids))

    def _terminating(self, seq: int, sid: str, payload: Payload) -> None:
        by = payload.get("preempted_by")
        if by is None:
            return
        self._report.preempted += 1
        victim, preemptor = self.sessions.get(sid, SessionSeen()), self.sessions.get(by)
        if preemptor is None:
            text = f"session {sid} preempted for unknown session {by}"
        elif preemptor.placements or preemptor.ended:
            text = f"session {sid} preempted for {by}, no longer waiting"
        elif preemptor.priority <= victim.priority:
            text = (
                f"session {sid} (priority {victim.priority}) preempted for {by} "
                f"(priority {preemptor.priority})"
            )
        else:
            return
        self._report.add(seq, "preemption", text)

    def _ended(self, seq: int, sid: str, payload: Payload) -> None:
        self.sessions.setdefault(sid, SessionSeen()).ended = True

    # ---- the end -------------------------------------------------------------------------

    def finish(self, ledgers: Ledgers, *, settled: bool) -> None:
        """Checks that need the whole log: placements against allocations, and (``settled``)
        nothing held for a session that ended."""
        placed: set[str] = set()  # kernels some placement names
        for sid, session in self.sessions.items():
            for attempt, placements in enumerate(session.placements):
                self._placement(ledgers, sid, session, attempt, placements)
                placed.update(placements)
        for kernel, given in ledgers.ever.items():
            for held in given if kernel not in placed else []:
                text = (
                    f"kernel {kernel} allocated on {held.node} for "
                    f"session {held.session}, which no placement names"
                )
                self._report.add(held.seq, "placement", text)
        if settled:
            for (_, kernel), held in ledgers.held.items():
                if self.ended(held.session):
                    text = (
                        f"kernel {kernel} still holds node {held.node} "
                        f"after session {held.session} ended"
                    )
                    self._report.add(held.seq, "not-given-back", text)
        report = self._report
        report.sessions = len(self.sessions)
        report.scheduled = sum(1 for s in self.sessions.values() if s.placements)
        report.nodes = len(ledgers.capacity)
        report.held = len(ledgers.held)

    def _placement(
        self,
        ledgers: Ledgers,
        sid: str,
        session: SessionSeen,
        attempt: int,
        placements: dict[str, str],
    ) -> None:
        """One attempt's placement against its kernels and their allocations."""
        add = self._report.add
        kernels = session.attempts[attempt] if attempt < len(session.attempts) else set()
        if kernels and set(placements) != kernels:
            text = f"session {sid} placed kernels {sorted(placements)}, has {sorted(kernels)}"
            add(None, "placement", text)
        for kernel, node in placements.items():
            given = ledgers.ever.get(kernel, [])
            if not given:
                text = f"session {sid}: kernel {kernel} placed on {node}, never allocated"
                add(None, "placement", text)
            wanted = session.kernels.get(kernel)
            for held in given:
                if (held.session, held.node) != (sid, node):
                    text = (
                        f"kernel {kernel} allocated on {held.node} "
                        f"for {held.session}; session {sid} placed it on {node}"
                    )
                    add(held.seq, "placement", text)
                elif wanted is not None and held.slots != wanted:
                    text = f"kernel {kernel} allocated {held.slots}, session {sid} asked for "
                    text += str(wanted)
                    add(held.seq, "placement", text)
