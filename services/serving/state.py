"""What the serving controller folds: the endpoints (``ev.endpoint.*``), their replicas'
sessions (``ev.session.*``, inference sessions only), each replica's ``inference`` address
(``ev.agent.*``: ``KernelServicePortsReported``) and its CPU and GPU use (``ev.activity.*``).
Pure: ``evolve`` does no I/O."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from commands.serving.aggregate import Endpoint
from events.catalogue import CATALOGUE
from events.domain.activity import SessionActivityReported
from events.domain.agent import KernelServicePortsReported
from events.envelope import StoredEvent
from events.fold import FoldedState
from schemas.activity import ActivitySource
from schemas.serving import INFERENCE_APP
from schemas.session import SessionType
from schemas.subjects import AggregateType, events_of
from services.serving.rules.reconcile import Phase, SessionFact

SUBJECTS = [
    events_of(kind)
    for kind in (
        AggregateType.ENDPOINT,
        AggregateType.SESSION,
        AggregateType.AGENT,
        AggregateType.ACTIVITY,
    )
]
UTILISATION_KEPT_S = 3600.0
"""How far back CPU and GPU reports are kept (a rule's window is at most an hour)."""
_ENDED = {"SessionTerminated": False, "SessionFailed": None, "SessionCancelled": True}
"""Session end -> whether it could not start (None: if it never ran)."""


class ServingState(FoldedState):
    consumer = "serving"

    def __init__(self) -> None:
        super().__init__()
        self.endpoints: dict[str, Endpoint] = {}
        self.replica_of: dict[str, tuple[str, int]] = {}
        """Session id -> (endpoint id, replica number), for every replica ever asked for."""
        self.sessions: dict[str, SessionFact] = {}
        """Inference sessions as the log says."""
        self.addresses: dict[str, str] = {}
        """Session id -> its ``inference`` app's ``host:port``."""
        self.utilisation: dict[str, deque[tuple[datetime, ActivitySource, float]]] = {}
        """Session id -> its CPU and GPU reports (when, which, percent), oldest first."""
        self.wake: Callable[[], None] = lambda: None
        """Called when something changed that a reconcile pass should look at."""

    def evolve(self, event: StoredEvent) -> None:
        envelope = event.envelope
        kind, aggregate_id = envelope.aggregate_type, envelope.aggregate_id
        if kind is AggregateType.ENDPOINT:
            endpoint = self.endpoints.get(aggregate_id)
            if endpoint is None:
                found = Endpoint.rehydrate([envelope])
                assert found is not None
                self.endpoints[aggregate_id] = endpoint = found
            else:
                endpoint.evolve([envelope])
            if envelope.name == "ReplicaRequested":
                number = int(envelope.payload["replica"])
                self.replica_of[endpoint.replicas[number].session_id] = (aggregate_id, number)
            self.wake()
        elif kind is AggregateType.SESSION:
            self._session(event)
        elif kind is AggregateType.AGENT and envelope.name == "KernelServicePortsReported":
            ports = CATALOGUE.decode(envelope)
            assert isinstance(ports, KernelServicePortsReported)
            if ports.session_id in self.sessions:
                for port in ports.ports:
                    if port.name == INFERENCE_APP:
                        self.addresses[ports.session_id] = port.address
                        self.wake()
        elif kind is AggregateType.ACTIVITY and envelope.name == "SessionActivityReported":
            reported = CATALOGUE.decode(envelope)
            assert isinstance(reported, SessionActivityReported)
            for report in reported.reports:
                if report.session_id in self.sessions and report.utilization_pct is not None:
                    kept = self.utilisation.setdefault(report.session_id, deque())
                    kept.append((report.at, report.source, report.utilization_pct))
                    while kept and (report.at - kept[0][0]).total_seconds() > UTILISATION_KEPT_S:
                        kept.popleft()

    def _session(self, event: StoredEvent) -> None:
        envelope = event.envelope
        session_id, name, payload = envelope.aggregate_id, envelope.name, envelope.payload
        if name == "SessionRequested":
            spec = payload.get("spec") or {}
            if spec.get("type") == SessionType.INFERENCE.value:
                self.sessions[session_id] = SessionFact(Phase.PENDING, payload.get("reason", ""))
                self.wake()
            return
        fact = self.sessions.get(session_id)
        if fact is None:
            return
        reason = str(payload.get("reason", ""))
        if name == "SessionStarted":
            fact = SessionFact(Phase.RUNNING, reason, started_at=envelope.occurred_at)
        elif name == "SessionRequeued":
            fact = SessionFact(Phase.PENDING, reason)
            self.addresses.pop(session_id, None)
        elif name in _ENDED:
            could_not = _ENDED[name]
            if could_not is None:
                could_not = fact.started_at is None
            fact = replace(fact, phase=Phase.ENDED, reason=reason, could_not_start=could_not)
            self.addresses.pop(session_id, None)
            self.utilisation.pop(session_id, None)
        else:
            return
        self.sessions[session_id] = fact
        self.wake()

    def forget(self, subject: str) -> None:
        parts = subject.split(".", 2)
        if len(parts) != 3:
            return
        kind, aggregate_id = parts[1], parts[2]
        if kind == AggregateType.ENDPOINT:
            self.endpoints.pop(aggregate_id, None)
        elif kind == AggregateType.SESSION:
            self.sessions.pop(aggregate_id, None)
            self.addresses.pop(aggregate_id, None)
