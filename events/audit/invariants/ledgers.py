"""The node ledgers replayed on their own (plain dicts over payloads, nothing of the scheduler's
state): no kernel allocated twice, no node over its capacity, no device held beyond itself.
Reads ``ev.node.*`` (ledgers) and ``ev.agent.*`` (the devices an agent reported). Pure.

Rules (each reported at the allocation that breaks it):

- ``double-allocation``: a kernel allocated while it holds an allocation (on another node, or
  again on the same one), or allocated again after its release;
- ``capacity``: a node whose allocated cpu, memory or GPU hundredths exceed its capacity right
  after an allocation (a capacity that shrinks under running kernels is the machine's doing,
  not a double booking, so only allocations are checked); ``unknown-node``: an allocation on a
  node never registered;
- ``device`` (allocations that name their devices): a device the node does not have, a device
  over 100 hundredths, one both whole-held and shared (or whole-held twice), a whole device
  not at 100, devices that do not add up to the allocation's GPU hundredths;
- ``after-end``: a kernel allocated after its session ended;
- ``registration``: a node registered twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from events.audit.invariants.report import InvariantReport

Slots = tuple[int, int, int]
"""cpu_milli, memory_bytes, gpu_hundredths."""
SLOT_FIELDS = ("cpu_milli", "memory_bytes", "gpu_hundredths")
Payload = dict[str, Any]


def slots_of(payload: Payload | None) -> Slots:
    payload = payload or {}
    return (
        int(payload.get("cpu_milli", 0)),
        int(payload.get("memory_bytes", 0)),
        int(payload.get("gpu_hundredths", 0)),
    )


@dataclass(slots=True)
class Held:
    """One kernel's allocation as the ledger holds it."""

    node: str
    session: str
    slots: Slots
    devices: list[Payload]
    seq: int


class Ledgers:
    """Every node's ledger: capacity, what is allocated, on which devices."""

    def __init__(self, report: InvariantReport, ended: Callable[[str], bool]) -> None:
        self._report = report
        self._ended = ended
        self.capacity: dict[str, Slots] = {}
        self.used: dict[str, list[int]] = {}
        self.devices: dict[str, dict[int, str]] = {}  # node -> index -> uuid
        self.shares: dict[tuple[str, int], list[int]] = {}  # (node, index) -> [shared, whole]
        self.held: dict[tuple[str, str], Held] = {}  # (node, kernel) -> what its ledger holds
        self.holders: dict[str, set[str]] = {}  # kernel -> nodes whose ledgers hold it
        self.ever: dict[str, list[Held]] = {}  # kernel -> every allocation it was given

    def handlers(self) -> dict[str, Callable[[int, str, Payload], None]]:
        return {
            "NodeRegistered": self._node_registered,
            "NodeCapacityChanged": self._capacity_changed,
            "ResourcesAllocated": self._allocated,
            "ResourcesReleased": self._released,
            "AgentRegistered": self._agent_registered,
        }

    def _node_registered(self, seq: int, node: str, payload: Payload) -> None:
        if node in self.capacity:
            self._report.add(seq, "registration", f"node {node} registered twice")
        self.capacity[node] = slots_of(payload.get("capacity"))
        self.used.setdefault(node, [0, 0, 0])
        self._devices_of(node, payload)

    def _capacity_changed(self, seq: int, node: str, payload: Payload) -> None:
        self.capacity[node] = slots_of(payload.get("capacity"))
        self._devices_of(node, payload)

    def _agent_registered(self, seq: int, agent: str, payload: Payload) -> None:
        self._devices_of(agent, payload)

    def _devices_of(self, node: str, payload: Payload) -> None:
        """The devices a node has: as its ledger lists them, or (ledgers written before
        devices) as its agent reported them. Node and agent share the id."""
        if payload.get("devices"):
            self.devices[node] = {int(d["index"]): d["uuid"] for d in payload["devices"]}

    def _allocated(self, seq: int, node: str, payload: Payload) -> None:
        kernel, sid = payload["kernel_id"], payload["session_id"]
        devices = list(payload.get("devices") or [])
        held = Held(node, sid, slots_of(payload.get("slots")), devices, seq)
        self._report.allocations += 1
        elsewhere = sorted(self.holders.get(kernel, set()) - {node})
        where = f"kernel {kernel} allocated on {node}"
        if elsewhere:
            self._report.add(seq, "double-allocation", f"{where} while held on {elsewhere[0]}")
        elif (node, kernel) in self.held:
            self._report.add(seq, "double-allocation", f"kernel {kernel} allocated twice on {node}")
        elif kernel in self.ever:
            text = f"kernel {kernel} allocated again on {node} after its release"
            self._report.add(seq, "double-allocation", text)
        if self._ended(sid):
            self._report.add(seq, "after-end", f"{where} after session {sid} ended")
        self.ever.setdefault(kernel, []).append(held)
        replaced = self.held.get((node, kernel))
        if replaced is not None:  # a ledger holds one allocation per kernel
            self._give_back(replaced)
        self._take(seq, kernel, held)

    def _released(self, seq: int, node: str, payload: Payload) -> None:
        kernel = payload["kernel_id"]
        held = self.held.pop((node, kernel), None)
        if held is not None:
            self.holders[kernel].discard(node)
            self._report.releases += 1
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
            text = f"kernel {kernel} allocated on {node}, a node never registered"
            self._report.add(seq, "unknown-node", text)
            return
        over = [
            f"{what} {used[i]}/{capacity[i]}"
            for i, what in enumerate(SLOT_FIELDS)
            if used[i] > capacity[i]
        ]
        if over:
            self._report.add(seq, "capacity", f"node {node} over capacity: {', '.join(over)}")
        if held.devices:
            self._report.with_devices += 1
            self._take_devices(seq, kernel, held)

    def _take_devices(self, seq: int, kernel: str, held: Held) -> None:
        node, known, report = held.node, self.devices.get(held.node, {}), self._report
        total = 0
        for share in held.devices:
            index, hundredths = int(share["index"]), int(share["hundredths"])
            whole = bool(share.get("whole", False))
            total += hundredths
            where = f"device {index} of node {node}"
            holds = f"kernel {kernel} holds {where}"
            if known.get(index) != share.get("uuid"):
                report.add(seq, "device", f"{holds}, which the node does not have")
            if whole and hundredths != 100:
                report.add(seq, "device", f"{holds} whole at {hundredths}/100")
            use = self.shares.setdefault((node, index), [0, 0])
            use[1 if whole else 0] += hundredths
            if use[0] > 100 or use[1] > 100:
                text = f"{where} over 100 hundredths ({use[0]} shared, {use[1]} whole)"
                report.add(seq, "device", text)
            if use[0] and use[1]:
                report.add(seq, "device", f"{where} both whole-held and shared")
        if total != held.slots[2]:
            text = f"kernel {kernel}: devices add up to {total}, slots say {held.slots[2]}"
            report.add(seq, "device", text)

    def _give_back(self, held: Held) -> None:
        used = self.used[held.node]
        for i, amount in enumerate(held.slots):
            used[i] -= amount
        for share in held.devices:
            use = self.shares[(held.node, int(share["index"]))]
            use[1 if share.get("whole") else 0] -= int(share["hundredths"])
