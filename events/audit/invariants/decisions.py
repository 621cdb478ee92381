"""One decision per cause, replayed over every event of the log (``ev.>``). Pure.

Event ids derive from the cause (``schemas.ids.event_id_for``: causation id, aggregate,
version), so a decision retried after an unknown outcome writes the same ids and the store
recognises its own write. What the log shows when that failed:

- ``duplicate-event``: an event id stored twice;
- ``version``: an aggregate whose versions do not run 1, 2, 3... (a version stored twice, or
  one skipped: the write guard was bypassed);
- ``decided-twice``: a command (a cause that names no event of the log) whose events on one
  aggregate are not one run: it was decided again after other decisions on that aggregate,
  where a retry should have found its first write. Reactions to an event are left out: a
  service may act on the same event more than once, as it learns more (the scheduler's
  decisions about a session name the session's last event, which may be the cause of an
  allocation and, later, of its release).
"""

from __future__ import annotations

from events.audit.invariants.report import InvariantReport


class Decisions:
    def __init__(self, report: InvariantReport) -> None:
        self._report = report
        self._ids: dict[str, int] = {}
        """Event id -> the position it was first stored at."""
        self._versions: dict[tuple[str, str], int] = {}
        self._last_cause: dict[tuple[str, str], str] = {}
        self._causes: dict[tuple[str, str], dict[str, int]] = {}
        """Aggregate -> every cause it has seen but its last -> where that cause's run began."""
        self._run_start: dict[tuple[str, str], int] = {}

    def apply(
        self, seq: int, kind: str, aggregate_id: str, version: int, event_id: str, cause: str
    ) -> None:
        first = self._ids.setdefault(event_id, seq)
        if first != seq:
            text = f"event {event_id} ({kind} {aggregate_id}) stored again, first at seq {first}"
            self._report.add(seq, "duplicate-event", text)
        key = (kind, aggregate_id)
        last = self._versions.get(key, 0)
        if version != last + 1:
            text = f"{kind} {aggregate_id}: version {version} follows version {last}"
            self._report.add(seq, "version", text)
        self._versions[key] = max(version, last)
        previous = self._last_cause.get(key)
        if previous == cause:
            return
        self._last_cause[key] = cause
        seen = self._causes.setdefault(key, {})
        if previous is not None:
            seen[previous] = self._run_start[key]
        self._run_start[key] = seq
        began = seen.get(cause)
        if began is not None and cause not in self._ids:
            text = (
                f"{kind} {aggregate_id}: cause {cause} decided again, "
                f"its first decision at seq {began}"
            )
            self._report.add(seq, "decided-twice", text)
