"""The invariant check: one fold over the log in stream order, feeding each event to the rules
that read it (``decisions`` reads every event; ``lifecycle``, ``placements``, ``ledgers``,
``quota`` and ``fair_share`` the events they name). Pure; ``replay`` reads the stream into it.

Every event costs a dict lookup and the few handlers that read it: payloads stay plain dicts
(no pydantic model per event), which keeps a replay of millions of events in seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from events.audit.invariants.decisions import Decisions
from events.audit.invariants.fair_share import FairShares
from events.audit.invariants.ledgers import Ledgers, Payload
from events.audit.invariants.lifecycle import Lifecycle
from events.audit.invariants.placements import Placements
from events.audit.invariants.quota import Quotas
from events.audit.invariants.report import InvariantReport
from events.envelope import StoredEvent

Handler = Callable[[int, str, Payload], None]


class Checker:
    """Feed events in stream order with ``apply`` (or ``undecodable``), then ``finish``."""

    def __init__(self) -> None:
        self.report = report = InvariantReport()
        self._decisions = Decisions(report)
        self._lifecycle = Lifecycle(report)
        self._placements = Placements(report)
        self._ledgers = Ledgers(report, self._placements.ended)
        self._quotas = Quotas(report)
        self._fair_shares = FairShares(report)
        self._handlers: dict[str, tuple[Handler, ...]] = {}
        for found in (
            self._lifecycle.handlers(),
            self._placements.handlers(self._ledgers),
            self._ledgers.handlers(),
            self._quotas.handlers(),
            self._fair_shares.handlers(),
        ):
            for name, handler in found.items():
                self._handlers[name] = (*self._handlers.get(name, ()), handler)

    def apply(
        self,
        seq: int,
        name: str,
        kind: str,
        aggregate_id: str,
        version: int,
        event_id: str,
        cause: str,
        at: datetime | str,
        payload: Payload,
    ) -> None:
        """One event: ``kind`` is its aggregate type, ``cause`` its causation id, ``at`` when
        it was decided (an ISO text is parsed only where a rule needs the time)."""
        self.report.events += 1
        self._decisions.apply(seq, kind, aggregate_id, version, event_id, cause)
        handlers = self._handlers.get(name)
        if handlers is None:
            return
        self._quotas.at = self._fair_shares.at = at
        for handler in handlers:
            try:
                handler(seq, aggregate_id, payload)
            except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
                # Its payload is not of its event's shape: reported, and the fold goes on
                # without it (a rule may have taken part of it).
                text = f"{name} of {kind} {aggregate_id} does not read: {exc!r}"
                self.report.add(seq, "malformed", text)
                return

    def undecodable(self, seq: int, text: str) -> None:
        """An event that could not be read at all (its bytes, its envelope, its subject)."""
        self.report.events += 1
        self.report.add(seq, "undecodable", text)

    def finish(self, *, settled: bool) -> InvariantReport:
        """The checks that need the whole log; ``settled``: the system was quiet when the log
        was read, so every ended session's resources must have been given back by now."""
        self._placements.finish(self._ledgers, settled=settled)
        self._quotas.finish(self._lifecycle.ended, settled=settled)
        self._fair_shares.finish()
        return self.report


def check(events: Iterable[StoredEvent], *, settled: bool = True) -> InvariantReport:
    """Replay ``events`` (decoded, in stream order) and report every violation."""
    checker = Checker()
    for event in events:
        e = event.envelope
        checker.apply(
            event.seq,
            e.name,
            e.aggregate_type.value,
            e.aggregate_id,
            e.aggregate_version,
            e.event_id,
            e.causation_id,
            e.occurred_at,
            e.payload,
        )
    return checker.finish(settled=settled)
