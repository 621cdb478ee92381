"""Replay checker: folds the session, node and agent events of a log on its own (plain dicts
over envelope payloads, nothing of the scheduler's state) and reports every allocation that
should never have happened. Reads ``ev.session.*``, ``ev.node.*`` and ``ev.agent.*``.

What counts as a violation:

- a kernel allocated while it holds an allocation (on another node, or again on the same one),
  or allocated again after its release;
- a node whose allocated cpu, memory or GPU hundredths exceed its capacity right after an
  allocation (a capacity that shrinks under running kernels is the machine's doing, not a
  double booking, so only allocations are checked), or an allocation on a node never
  registered;
- with ``devices`` on an allocation: a device the node does not have, a device over
  100 hundredths, a device both whole-held and shared (or whole-held twice), a whole device
  not at 100, devices that do not add up to the allocation's GPU hundredths;
- a session requested twice (a create stored twice);
- a session scheduled more than once (once per attempt, where a requeue after node loss
  starts a new attempt with new kernels), or requeued while not placed; a scheduled session
  whose kernels' allocations do not match its placements (node, session, slots), an
  allocation no placement names, an allocation made after its session ended;
- a kernel started on a node that never held it;
- a session preempted for one that is unknown, already placed or ended, or of a priority not
  above its own;
- once the system is settled (``settled=True``): an allocation still held after its session
  ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from events.bus import Bus
from events.envelope import StoredEvent
from events.tail import Tail
from schemas.subjects import AggregateType, events_of

SUBJECTS = [
    events_of(kind) for kind in (AggregateType.SESSION, AggregateType.NODE, AggregateType.AGENT)
]
ENDED = frozenset({"SessionTerminated", "SessionCancelled", "SessionFailed"})
Slots = tuple[int, int, int]
"""cpu_milli, memory_bytes, gpu_hundredths."""


def slots_of(payload: dict[str, Any] | None) -> Slots:
    payload = payload or {}
    return (
        int(payload.get("cpu_milli", 0)),
        int(payload.get("memory_bytes", 0)),
        int(payload.get("gpu_hundredths", 0)),
    )


@dataclass
class Held:
    """One kernel's allocation as the ledger holds it."""

    node: str
    session: str
    slots: Slots
    devices: list[dict[str, Any]]
    seq: int


@dataclass
class SessionSeen:
    kernels: dict[str, Slots | None] = field(default_factory=dict)
    """Kernel id -> the slots it asked for (None where the spec does not say per kernel)."""
    placements: list[dict[str, str]] = field(default_factory=list)
    """One entry per ``SessionScheduled``."""
    attempts: list[set[str]] = field(default_factory=list)
    """The kernel ids of each attempt: the request's, then each requeue's."""
    ended: bool = False
    priority: int = 0


@dataclass
class ReplayReport:
    events: int = 0
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
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations


class Replay:
    """The fold: feed events in stream order with ``apply``, then ``finish``."""

    def __init__(self) -> None:
        self.capacity: dict[str, Slots] = {}
        self.used: dict[str, list[int]] = {}
        self.devices: dict[str, dict[int, str]] = {}  # node -> index -> uuid (agent's report)
        self.shares: dict[tuple[str, int], list[int]] = {}  # (node, index) -> [shared, whole]
        self.held: dict[tuple[str, str], Held] = {}  # (node, kernel) -> what its ledger holds
        self.holders: dict[str, set[str]] = {}  # kernel -> nodes whose ledgers hold it
        self.ever: dict[str, list[Held]] = {}  # kernel -> every allocation it was given
        self.sessions: dict[str, SessionSeen] = {}
        self.report = ReplayReport()
        self._handlers: dict[str, Callable[[int, str, dict[str, Any]], None]] = {
            "SessionRequested": self._session_requested,
            "SessionScheduled": self._session_scheduled,
            "SessionTerminating": self._session_terminating,
            "SessionRequeued": self._session_requeued,
            **dict.fromkeys(ENDED, self._session_ended),
            "NodeRegistered": self._node_registered,
            "NodeCapacityChanged": self._capacity_changed,
            "ResourcesAllocated": self._allocated,
            "ResourcesReleased": self._released,
            "AgentRegistered": self._agent_registered,
            "KernelStarted": self._kernel_started,
        }

    def violation(self, seq: int | None, text: str) -> None:
        self.report.violations.append(f"{'end' if seq is None else f'seq {seq}'}: {text}")

    def apply(self, seq: int, name: str, aggregate_id: str, payload: dict[str, Any]) -> None:
        self.report.events += 1
        handler = self._handlers.get(name)
        if handler is not None:
            handler(seq, aggregate_id, payload)

    # ---- sessions ------------------------------------------------------------------------

    def _session_requested(self, seq: int, sid: str, payload: dict[str, Any]) -> None:
        if sid in self.sessions and self.sessions[sid].attempts:
            self.violation(seq, f"session {sid} requested twice")
        kernel_ids = list(payload.get("kernel_ids", []))
        specs = (payload.get("spec") or {}).get("kernels", [])
        same = len(specs) == len(kernel_ids)
        self.sessions[sid] = SessionSeen(
            kernels={
                k: slots_of(specs[i].get("resources")) if same else None
                for i, k in enumerate(kernel_ids)
            },
            priority=int((payload.get("spec") or {}).get("priority", 10)),
            attempts=[set(kernel_ids)],
        )

    def _session_scheduled(self, seq: int, sid: str, payload: dict[str, Any]) -> None:
        session = self.sessions.setdefault(sid, SessionSeen())
        session.placements.append(dict(payload.get("placements", {})))
        if len(session.placements) > max(len(session.attempts), 1):
            self.violation(seq, f"session {sid} scheduled {len(session.placements)} times")
        if session.ended:
            self.violation(seq, f"session {sid} scheduled after it ended")

    def _session_requeued(self, seq: int, sid: str, payload: dict[str, Any]) -> None:
        self.report.requeued += 1
        session = self.sessions.setdefault(sid, SessionSeen())
        if len(session.placements) < len(session.attempts) or session.ended:
            self.violation(seq, f"session {sid} requeued while not placed")
        kernel_ids = list(payload.get("kernel_ids", []))
        asked = list(session.kernels.values())[: len(kernel_ids)]
        same = len(asked) == len(kernel_ids)
        session.kernels.update({k: asked[i] if same else None for i, k in enumerate(kernel_ids)})
        session.attempts.append(set(kernel_ids))

    def _session_terminating(self, seq: int, sid: str, payload: dict[str, Any]) -> None:
        by = payload.get("preempted_by")
        if by is None:
            return
        self.report.preempted += 1
        victim, preemptor = self.sessions.get(sid, SessionSeen()), self.sessions.get(by)
        if preemptor is None:
            self.violation(seq, f"session {sid} preempted for unknown session {by}")
        elif preemptor.placements or preemptor.ended:
            self.violation(seq, f"session {sid} preempted for {by}, no longer waiting")
        elif preemptor.priority <= victim.priority:
            self.violation(
                seq,
                f"session {sid} (priority {victim.priority}) preempted for {by} "
                f"(priority {preemptor.priority})",
            )

    def _session_ended(self, seq: int, sid: str, payload: dict[str, Any]) -> None:
        self.sessions.setdefault(sid, SessionSeen()).ended = True

    # ---- node ledgers --------------------------------------------------------------------

    def _node_registered(self, seq: int, node: str, payload: dict[str, Any]) -> None:
        if node in self.capacity:
            self.violation(seq, f"node {node} registered twice")
        self.capacity[node] = slots_of(payload.get("capacity"))
        self.used.setdefault(node, [0, 0, 0])
        self._devices_of(node, payload)

    def _capacity_changed(self, seq: int, node: str, payload: dict[str, Any]) -> None:
        self.capacity[node] = slots_of(payload.get("capacity"))
        self._devices_of(node, payload)

    def _devices_of(self, node: str, payload: dict[str, Any]) -> None:
        """The devices a node has: as its ledger lists them, or (ledgers written before
        devices) as its agent reported them. Node and agent share the id."""
        if payload.get("devices"):
            self.devices[node] = {int(d["index"]): d["uuid"] for d in payload["devices"]}

    def _allocated(self, seq: int, node: str, payload: dict[str, Any]) -> None:
        kernel, sid = payload["kernel_id"], payload["session_id"]
        slots, devices = slots_of(payload.get("slots")), list(payload.get("devices") or [])
        held = Held(node, sid, slots, devices, seq)
        self.report.allocations += 1
        elsewhere = sorted(self.holders.get(kernel, set()) - {node})
        if elsewhere:
            self.violation(seq, f"kernel {kernel} allocated on {node} while held on {elsewhere[0]}")
        elif (node, kernel) in self.held:
            self.violation(seq, f"kernel {kernel} allocated twice on {node}")
        elif kernel in self.ever:
            self.violation(seq, f"kernel {kernel} allocated again on {node} after its release")
        if self.sessions.get(sid, SessionSeen()).ended:
            self.violation(seq, f"kernel {kernel} allocated on {node} after session {sid} ended")
        self.ever.setdefault(kernel, []).append(held)
        replaced = self.held.get((node, kernel))
        if replaced is not None:  # a ledger holds one allocation per kernel
            self._give_back(replaced)
        self._take(seq, kernel, held)

    def _released(self, seq: int, node: str, payload: dict[str, Any]) -> None:
        held = self.held.pop((node, payload["kernel_id"]), None)
        if held is not None:
            self.holders[payload["kernel_id"]].discard(node)
            self.report.releases += 1
            self._give_back(held)

    def _take(self, seq: int, kernel: str, held: Held) -> None:
        node = held.node
        self.held[(node, kernel)] = held
        self.holders.setdefault(kernel, set()).add(node)
        used = self.used.setdefault(node, [0, 0, 0])
        for i, amount in enumerate(held.slots):
            used[i] += amount
        capacity = self.capacity.get(node)
        if capacity is None:
            self.violation(seq, f"kernel {kernel} allocated on {node}, a node never registered")
            return
        over = [
            f"{what} {used[i]}/{capacity[i]}"
            for i, what in enumerate(("cpu_milli", "memory_bytes", "gpu_hundredths"))
            if used[i] > capacity[i]
        ]
        if over:
            self.violation(seq, f"node {node} over capacity: {', '.join(over)}")
        if held.devices:
            self.report.with_devices += 1
            self._take_devices(seq, kernel, held)

    def _take_devices(self, seq: int, kernel: str, held: Held) -> None:
        node, known = held.node, self.devices.get(held.node, {})
        total = 0
        for share in held.devices:
            index, hundredths, whole = (
                int(share["index"]),
                int(share["hundredths"]),
                share.get("whole", False),
            )
            total += hundredths
            where = f"device {index} of node {node}"
            if known.get(index) != share.get("uuid"):
                self.violation(seq, f"kernel {kernel} holds {where}, which the node does not have")
            if whole and hundredths != 100:
                self.violation(seq, f"kernel {kernel} holds {where} whole at {hundredths}/100")
            use = self.shares.setdefault((node, index), [0, 0])
            use[1 if whole else 0] += hundredths
            if use[0] > 100 or use[1] > 100:
                self.violation(
                    seq, f"{where} over 100 hundredths ({use[0]} shared, {use[1]} whole)"
                )
            if use[0] and use[1]:
                self.violation(seq, f"{where} both whole-held and shared")
        if total != held.slots[2]:
            self.violation(
                seq, f"kernel {kernel}: devices add up to {total}, slots say {held.slots[2]}"
            )

    def _give_back(self, held: Held) -> None:
        used = self.used[held.node]
        for i, amount in enumerate(held.slots):
            used[i] -= amount
        for share in held.devices:
            use = self.shares[(held.node, int(share["index"]))]
            use[1 if share.get("whole") else 0] -= int(share["hundredths"])

    # ---- agents --------------------------------------------------------------------------

    def _agent_registered(self, seq: int, agent: str, payload: dict[str, Any]) -> None:
        self._devices_of(agent, payload)

    def _kernel_started(self, seq: int, agent: str, payload: dict[str, Any]) -> None:
        self.report.started += 1
        kernel = payload["kernel_id"]
        if not any(h.node == agent for h in self.ever.get(kernel, [])):
            self.violation(seq, f"kernel {kernel} started on node {agent}, which never held it")

    def _placement(
        self,
        sid: str,
        session: SessionSeen,
        attempt: int,
        placements: dict[str, str],
        placed: set[str],
    ) -> None:
        """One attempt's placement against its kernels and their allocations."""
        kernels = session.attempts[attempt] if attempt < len(session.attempts) else set()
        if kernels and set(placements) != kernels:
            self.violation(
                None, f"session {sid} placed kernels {sorted(placements)}, has {sorted(kernels)}"
            )
        for kernel, node in placements.items():
            placed.add(kernel)
            given = self.ever.get(kernel, [])
            if not given:
                self.violation(
                    None, f"session {sid}: kernel {kernel} placed on {node}, never allocated"
                )
            for held in given:
                wanted = session.kernels.get(kernel)
                if (held.session, held.node) != (sid, node):
                    self.violation(
                        held.seq,
                        f"kernel {kernel} allocated on {held.node} "
                        f"for {held.session}; session {sid} placed it on {node}",
                    )
                elif wanted is not None and held.slots != wanted:
                    self.violation(
                        held.seq,
                        f"kernel {kernel} allocated {held.slots}, session {sid} asked for {wanted}",
                    )

    # ---- the end -------------------------------------------------------------------------

    def finish(self, *, settled: bool) -> ReplayReport:
        """Checks that need the whole log: placements against allocations, and (``settled``)
        nothing held for a session that ended."""
        placed: set[str] = set()  # kernels some placement names
        for sid, session in self.sessions.items():
            for attempt, placements in enumerate(session.placements):
                self._placement(sid, session, attempt, placements, placed)
        for kernel, given in self.ever.items():
            for held in given if kernel not in placed else []:
                self.violation(
                    held.seq,
                    f"kernel {kernel} allocated on {held.node} for "
                    f"session {held.session}, which no placement names",
                )
        if settled:
            for (_, kernel), held in self.held.items():
                if self.sessions.get(held.session, SessionSeen()).ended:
                    self.violation(
                        held.seq,
                        f"kernel {kernel} still holds node {held.node} "
                        f"after session {held.session} ended",
                    )
        report = self.report
        report.sessions = len(self.sessions)
        report.scheduled = sum(1 for s in self.sessions.values() if s.placements)
        report.nodes = len(self.capacity)
        report.held = len(self.held)
        return report


def check(events: Iterable[StoredEvent], *, settled: bool = True) -> ReplayReport:
    """Replay ``events`` (in stream order) and report."""
    replay = Replay()
    for event in events:
        envelope = event.envelope
        replay.apply(event.seq, envelope.name, envelope.aggregate_id, envelope.payload)
    return replay.finish(settled=settled)


async def read_log(bus: Bus, *, fetch_timeout: float = 1.0) -> list[StoredEvent]:
    """Every session, node and agent event stored so far, in stream order, through an ordered
    consumer from sequence 1."""
    tail = Tail(bus, from_seq=1, subjects=SUBJECTS, batch=1024)
    events: list[StoredEvent] = []
    try:
        while True:
            try:
                batch = await tail.fetch(timeout=fetch_timeout)
            except TimeoutError:  # nats-py's own, raised when the loop is busy: read again
                continue
            events.extend(batch)
            if (batch and tail.pending == 0) or (not batch and await tail.num_pending() == 0):
                return events
    finally:
        await tail.close()


async def replay_log(bus: Bus, *, settled: bool = True) -> ReplayReport:
    return check(await read_log(bus), settled=settled)
