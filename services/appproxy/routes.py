"""The app proxy's route table: a pure fold of ``ev.session.*``, ``ev.agent.*`` and
``ev.endpoint.*``.

A session's apps come from its kernels' ``KernelServicePortsReported``; an ``open`` ``http``
app of a RUNNING session is a route (its main kernel's app when several kernels report one
name). ``SessionTerminating`` and every terminal status end the session: its routes go and it
is remembered as ended (the proxy answers 410 there, 404 where it never knew a route). A
requeued session forgets its old kernels' apps until the new ones report.

Endpoints are folded by ``endpoints.table.EndpointTable`` (``RouteTable.endpoints``); a
replica is reached at its session's ``inference`` app (``address``), which is never a route of
its own: it is reported ``preopen``, and only an endpoint's URL leads there.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from events.catalogue import CATALOGUE
from events.domain.agent import AgentRegistered, KernelServicePortsReported, KernelStarted
from events.domain.session import (
    SessionCancelled,
    SessionFailed,
    SessionRequested,
    SessionRequeued,
    SessionStarted,
    SessionTerminated,
    SessionTerminating,
)
from events.envelope import StoredEvent
from events.fold import FoldedState
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.subjects import AggregateType, events_of, parse_event_subject
from schemas.terminal_tokens import TERMINAL
from services.appproxy.endpoints.table import NAMES as ENDPOINT_NAMES
from services.appproxy.endpoints.table import EndpointTable

SUBJECTS = [
    events_of(AggregateType.SESSION), events_of(AggregateType.AGENT),
    events_of(AggregateType.ENDPOINT),
]  # fmt: skip
ENDING = (SessionTerminating, SessionTerminated, SessionCancelled, SessionFailed)
NAMES = {
    c.event_name
    for c in (SessionRequested, SessionStarted, SessionRequeued, KernelServicePortsReported,
              AgentRegistered, KernelStarted, *ENDING)
} | ENDPOINT_NAMES  # fmt: skip


@dataclass(frozen=True, slots=True)
class Route:
    session_id: str
    kernel_id: str
    app: str
    upstream: str
    """``host:port`` of the app, as its agent reported it; for the terminal, the base URL of
    the main kernel's agent's terminal endpoint (``ws://host:port``)."""
    owner: str | None
    """The owner's user id (None: a session from before tenancy, admins only)."""
    domain: str | None
    public: bool


ENDED_KEPT = 100_000
"""Ended sessions remembered (for 410 and to ignore their late events); older ones are
forgotten first, and their URLs then answer 404."""


class Ended:
    """The ids of sessions that ended, the latest ``ENDED_KEPT`` of them."""

    def __init__(self, kept: int = ENDED_KEPT) -> None:
        self._kept = kept
        self._ids: dict[str, None] = {}

    def add(self, session_id: str) -> None:
        self._ids[session_id] = None
        if len(self._ids) > self._kept:
            del self._ids[next(iter(self._ids))]

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)


@dataclass(slots=True)
class _Session:
    owner: str | None = None
    domain: str | None = None
    kernel_ids: tuple[str, ...] = ()
    running: bool = False
    ports: dict[str, tuple[ReportedPort, ...]] = field(default_factory=dict)
    """Kernel id -> its apps as reported."""


class RouteTable(FoldedState):
    consumer = "appproxy"

    def __init__(self) -> None:
        super().__init__()
        self.sessions: dict[str, _Session] = {}
        self.ended = Ended()
        self.terminals: dict[str, str] = {}
        """Agent (node) id -> its terminal endpoint, from its latest registration."""
        self.nodes: dict[str, str] = {}
        """Kernel id -> the agent that started it (kernels of sessions not ended)."""
        self.slots: dict[tuple[str, str], int] = {}
        """``(session, app)`` -> its slot: the offset of its port in port mode's range. Each
        app reported open takes the lowest slot free at that point of the log and keeps it
        until its session ends, so every replica and every restart agrees."""
        self._at_slot: dict[int, tuple[str, str]] = {}
        self._free_slots: list[int] = []
        self._apps_with_slots: dict[str, list[str]] = {}
        self.endpoints = EndpointTable()

    def evolve(self, event: StoredEvent) -> None:
        if event.name not in NAMES:
            return
        message = CATALOGUE.decode(event.envelope)
        sid = event.envelope.aggregate_id
        if event.envelope.aggregate_type is AggregateType.ENDPOINT:
            self.endpoints.evolve(message, sid)
        elif isinstance(message, AgentRegistered):
            self.terminals[sid] = message.terminal_url
        elif isinstance(message, KernelStarted):
            if message.session_id not in self.ended:
                self.nodes[message.kernel_id] = sid
        elif isinstance(message, KernelServicePortsReported):
            sid = message.session_id
            if sid not in self.ended:
                self.sessions.setdefault(sid, _Session()).ports[message.kernel_id] = message.ports
                self._take_slots(sid, sorted({p.name for p in message.ports if _served(p)}))
        elif isinstance(message, ENDING):
            ended = self.sessions.pop(sid, None)
            for kernel_id in ended.kernel_ids if ended is not None else ():
                self.nodes.pop(kernel_id, None)
            self._free_slots_of(sid)
            self.ended.add(sid)
        elif sid in self.ended:
            return
        elif isinstance(message, SessionRequested):
            session = self.sessions.setdefault(sid, _Session())
            session.kernel_ids = message.kernel_ids
            if message.owner is not None:
                session.owner, session.domain = message.owner.user_id, message.owner.domain
        elif isinstance(message, SessionStarted):
            self.sessions.setdefault(sid, _Session()).running = True
        elif isinstance(message, SessionRequeued):
            session = self.sessions.setdefault(sid, _Session())
            for kernel_id in set(session.kernel_ids) - set(message.kernel_ids):
                self.nodes.pop(kernel_id, None)
            session.kernel_ids, session.running = message.kernel_ids, False
            session.ports = {k: p for k, p in session.ports.items() if k in message.kernel_ids}

    def _take_slots(self, session_id: str, apps: list[str]) -> None:
        for app in apps:
            if (session_id, app) in self.slots:
                continue
            slot = heapq.heappop(self._free_slots) if self._free_slots else len(self._at_slot)
            self.slots[(session_id, app)] = slot
            self._at_slot[slot] = (session_id, app)
            self._apps_with_slots.setdefault(session_id, []).append(app)

    def _free_slots_of(self, session_id: str) -> None:
        for app in self._apps_with_slots.pop(session_id, ()):
            slot = self.slots.pop((session_id, app))
            del self._at_slot[slot]
            heapq.heappush(self._free_slots, slot)

    def forget(self, subject: str) -> None:
        kind, aggregate_id = parse_event_subject(subject)
        if kind is AggregateType.ENDPOINT:
            self.endpoints.forget(aggregate_id)

    def address(self, session_id: str, app: str) -> str | None:
        """Where a running session's kernels reported ``app``, whatever its protocol and
        state (an inference replica's is ``preopen``, not probed: the serving controller's
        probes say when it answers), the main kernel's first."""
        session = self.sessions.get(session_id)
        if session is None or not session.running:
            return None
        for kernel_id in self._kernel_order(session):
            for port in session.ports.get(kernel_id, ()):
                if port.name == app:
                    return port.address
        return None

    def at_slot(self, slot: int) -> tuple[str, str] | None:
        """``(session, app)`` holding the slot, if any."""
        return self._at_slot.get(slot)

    def route(self, session_id: str, app: str) -> Route | None:
        """The route to ``app`` of a running session, if it has one open."""
        session = self.sessions.get(session_id)
        if session is None or not session.running:
            return None
        if app == TERMINAL:
            return self._terminal(session_id, session)
        for kernel_id in self._kernel_order(session):
            for port in session.ports.get(kernel_id, ()):
                if port.name == app and _served(port):
                    return Route(
                        session_id, kernel_id, app, port.address,
                        session.owner, session.domain, port.public,
                    )  # fmt: skip
        return None

    @staticmethod
    def _kernel_order(session: _Session) -> list[str]:
        kernels = session.kernel_ids
        return [*kernels, *(k for k in session.ports if k not in kernels)]

    def _terminal(self, session_id: str, session: _Session) -> Route | None:
        main = session.kernel_ids[0] if session.kernel_ids else None
        node = self.nodes.get(main) if main is not None else None
        url = self.terminals.get(node, "") if node is not None else ""
        if main is None or not url:
            return None
        return Route(session_id, main, TERMINAL, url, session.owner, session.domain, False)

    def routes(self) -> list[Route]:
        found = []
        for sid, session in self.sessions.items():
            names = {p.name for ports in session.ports.values() for p in ports if _served(p)}
            found += [r for r in (self.route(sid, n) for n in sorted(names)) if r is not None]
        return found


def _served(port: ReportedPort) -> bool:
    return port.protocol is PortProtocol.HTTP and port.state is PortState.OPEN
