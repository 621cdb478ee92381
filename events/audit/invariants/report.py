"""What an invariant check finds: each violation with its position, and what was counted on the
way (the tests compare the counts with what they drove). Pure; no subjects."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken promise of the log. ``seq``: the stream position that broke it (None: only
    the whole log shows it); ``rule``: a short stable name (``double-allocation``,
    ``capacity``, ``transition``, ``quota``, ...); ``text``: a sentence naming the aggregates."""

    seq: int | None
    rule: str
    text: str

    def __str__(self) -> str:
        where = "end" if self.seq is None else f"seq {self.seq}"
        return f"{where} [{self.rule}]: {self.text}"


@dataclass
class InvariantReport:
    events: int = 0
    """Events read (undecodable ones included)."""
    violations: list[Violation] = field(default_factory=list)
    sessions: int = 0
    scheduled: int = 0
    """Sessions with at least one ``SessionScheduled``."""
    nodes: int = 0
    allocations: int = 0
    """``ResourcesAllocated`` events."""
    releases: int = 0
    held: int = 0
    """Allocations still held at the end of the log."""
    started: int = 0
    requeued: int = 0
    preempted: int = 0
    """Sessions stopped to make room for another (``SessionTerminating`` with
    ``preempted_by``)."""
    with_devices: int = 0
    """Allocations that named their devices (and so had them checked)."""
    reservations: int = 0
    """``QuotaReserved`` events checked against the limits the log says applied."""
    fair_shares: int = 0
    """Fair-share factors recorded in reasons, found to be what the log implies."""
    fair_shares_unchecked: int = 0
    """Fair-share factors the log cannot judge (``fair_share`` says when)."""

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, seq: int | None, rule: str, text: str) -> None:
        self.violations.append(Violation(seq, rule, text))

    def summary(self) -> str:
        """One line for the operator: how much was read and what broke, by rule."""
        read = (
            f"{self.events} events: {self.sessions} sessions, {self.nodes} nodes, "
            f"{self.allocations} allocations, {self.reservations} reservations"
        )
        if self.ok:
            return f"{read}; no violation"
        rules = Counter(v.rule for v in self.violations)
        by_rule = ", ".join(f"{rule} {n}" for rule, n in sorted(rules.items()))
        return f"{read}; {len(self.violations)} violations ({by_rule})"
