"""Who waited in a pass, for the fair-share check (``fair_share``): each session's group and
owner, and the spans it waited to be placed (admitted and PENDING), from ``ev.session.*``.
Pure; the doubt about a pass's fold is ``fair_share``'s to explain.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from events.audit.invariants.ledgers import Payload
from events.audit.invariants.placements import ENDED

Account = tuple[str, str, str]
Handler = Callable[[int, str, Payload], None]
OUT = frozenset({"SessionScheduled", "SessionTerminating", *ENDED})
"""A session that was waiting is no longer (placed, or ending)."""


class Waited(Enum):
    SURE = "sure"
    """The pass placed it or left it waiting: its owner counted as waiting."""
    MAYBE = "maybe"
    """The pass may or may not have had it in its queue."""
    NO = "no"


@dataclass(slots=True)
class Span:
    """From the event that made it placeable to the one that ended that (None: still)."""

    since_seq: int
    since: float
    until_seq: int | None = None
    until: float | None = None
    placed: bool = False


@dataclass(slots=True)
class Waiter:
    group: str
    account: Account | None
    """None: a session from before tenancy (its owner is its envelope's tenant)."""
    held_back: bool
    """It depends on other sessions or has a start time: a pass may hold it back."""
    admitted: bool = False
    spans: list[Span] = field(default_factory=list)

    def waited(self, seq: int, now: float, grace: float) -> Waited:
        """Whether the pass at ``now`` that wrote the event at ``seq`` had it in its queue."""
        span = next((s for s in reversed(self.spans) if s.since_seq < seq), None)
        if span is None:
            return Waited.NO
        if span.until_seq is not None and span.until_seq < seq:
            if span.until == now and span.placed:
                return Waited.SURE  # placed by this very pass
            return (
                Waited.NO
                if span.until is not None and span.until <= now - grace
                else (Waited.MAYBE)
            )
        if self.held_back or span.until == now:
            return Waited.MAYBE  # held back, or ended by this very pass before it placed
        return Waited.SURE if span.since == now or span.since <= now - grace else Waited.MAYBE


class Waiters:
    def __init__(self, grace: float) -> None:
        self._grace = grace
        self.sessions: dict[str, Waiter] = {}
        self._by_group: dict[str, dict[str, None]] = {}
        """Group -> sessions waiting now, or lately (a pass's doubt may cover them)."""
        self._gone: dict[str, deque[tuple[float, str]]] = {}
        """Group -> sessions that stopped waiting, and when, oldest first."""

    def handlers(self, now: Callable[[], float]) -> dict[str, Handler]:
        def requested(seq: int, sid: str, payload: Payload) -> None:
            spec, owner = payload.get("spec") or {}, payload.get("owner")
            account = None
            if owner is not None:
                account = (owner["domain"], owner["project_id"], owner["user_id"])
            held_back = bool(spec.get("depends_on")) or spec.get("starts_at") is not None
            group = spec.get("resource_group", "default")
            self.sessions[sid] = Waiter(group, account, held_back)
            if owner is None:  # admitted as it is asked for
                admitted(seq, sid, payload)

        def admitted(seq: int, sid: str, payload: Payload) -> None:
            waiter = self.sessions.get(sid)
            if waiter is not None:
                waiter.admitted = True
                self._begin(seq, sid, waiter, now())

        def requeued(seq: int, sid: str, payload: Payload) -> None:
            waiter = self.sessions.get(sid)
            if waiter is not None and waiter.admitted:
                self._begin(seq, sid, waiter, now())

        def out(name: str) -> Handler:
            def handler(seq: int, sid: str, payload: Payload) -> None:
                waiter = self.sessions.get(sid)
                if waiter is not None and name == "SessionScheduled" and not waiter.admitted:
                    # Admitted and placed by one pass (one event): it waited in that pass's
                    # queue, whose pending reasons the pass writes after its placements.
                    waiter.admitted = True
                    self._begin(seq, sid, waiter, now())
                span = waiter.spans[-1] if waiter is not None and waiter.spans else None
                if waiter is not None and span is not None and span.until_seq is None:
                    span.until_seq, span.until = seq, now()
                    span.placed = name == "SessionScheduled"
                    self._gone.setdefault(waiter.group, deque()).append((span.until, sid))
                    self._forget(waiter.group, span.until)

            return handler

        return {
            "SessionRequested": requested,
            "SessionAdmitted": admitted,
            "SessionRequeued": requeued,
            **{name: out(name) for name in OUT},
        }

    def _begin(self, seq: int, sid: str, waiter: Waiter, at: float) -> None:
        if waiter.spans and waiter.spans[-1].until_seq is None:
            return  # already waiting
        waiter.spans.append(Span(seq, at))
        self._by_group.setdefault(waiter.group, {})[sid] = None

    def lately(self, group: str, now: float) -> list[str]:
        """The sessions of ``group`` waiting at ``now``, or lately."""
        self._forget(group, now)
        return list(self._by_group.get(group, {}))

    def _forget(self, group: str, now: float) -> None:
        """Sessions that stopped waiting twice the grace before ``now`` leave the index (no
        pass's doubt reaches them), so it holds only what waits, whatever the log's length."""
        gone, index = self._gone.get(group, deque()), self._by_group.get(group, {})
        while gone and gone[0][0] <= now - 2 * self._grace:
            _, sid = gone.popleft()
            span = self.sessions[sid].spans[-1]
            if span.until is not None and span.until <= now - 2 * self._grace:
                index.pop(sid, None)
