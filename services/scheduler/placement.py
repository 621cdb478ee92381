"""Placement: which node takes each waiting session. Pure: a snapshot in, decisions out; it
reads and writes no subject.

Policy (first version):

- **FIFO** over one resource group's waiting sessions, in the order they were requested. A
  session that fits nowhere does not block those behind it (no reservations yet, so a large
  request can be overtaken indefinitely; aging or reservations come with the fairness work).
- **Whole GPUs only**: a request with a fraction of a GPU waits with a reason saying so.
- A kernel goes to an **available** node (not cordoned, not lost) whose agent **has the image**
  and has enough free CPU, memory and whole GPUs. Among those, the node with the **fewest free
  GPUs wins, then the smallest node id** ("concentrated", a stable order): GPU requests fill
  partly used GPU nodes before opening whole ones, so large multi-GPU requests still find a
  whole node later, and CPU-only requests go to nodes without free GPUs first instead of
  taking CPU and memory that a GPU request on that node would need.
- All kernels of a session are placed or none (gang placement within the pass).
- Each decision sees what earlier decisions of the same pass consumed.

The scan is linear in the group's nodes per kernel; an index by free GPUs comes with the
throughput work.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from schemas.resources import ResourceSlots
from services.scheduler.reasons import (
    FRACTIONAL_GPUS,
    NodeOffer,
    fractional,
    whole_gpus,
    why_waiting,
)

__all__ = [
    "FRACTIONAL_GPUS",
    "Decision",
    "KernelRequest",
    "NodeOffer",
    "Placed",
    "SessionRequest",
    "Waiting",
    "place",
]


@dataclass(frozen=True, slots=True)
class KernelRequest:
    kernel_id: str
    slots: ResourceSlots


@dataclass(frozen=True, slots=True)
class SessionRequest:
    session_id: str
    image: str
    kernels: tuple[KernelRequest, ...]


@dataclass(frozen=True, slots=True)
class Placed:
    session_id: str
    placements: dict[str, str]
    """Kernel id -> node id."""


@dataclass(frozen=True, slots=True)
class Waiting:
    session_id: str
    reason: str


Decision = Placed | Waiting


class _Node:
    """A node's free quanta while a pass consumes them (plain ints: this is the hot loop)."""

    __slots__ = ("cpu", "gpu", "memory", "offer")

    def __init__(self, offer: NodeOffer) -> None:
        self.offer = offer
        self.cpu = offer.free.cpu_milli
        self.memory = offer.free.memory_bytes
        self.gpu = whole_gpus(offer.free)

    def fits(self, need: ResourceSlots) -> bool:
        return (
            need.cpu_milli <= self.cpu
            and need.memory_bytes <= self.memory
            and need.gpu_hundredths <= self.gpu
        )

    def take(self, need: ResourceSlots, sign: int = 1) -> None:
        self.cpu -= sign * need.cpu_milli
        self.memory -= sign * need.memory_bytes
        self.gpu -= sign * need.gpu_hundredths

    def now(self) -> NodeOffer:
        free = ResourceSlots(cpu_milli=self.cpu, memory_bytes=self.memory, gpu_hundredths=self.gpu)
        return replace(self.offer, free=free)


def place(requests: Iterable[SessionRequest], nodes: Iterable[NodeOffer]) -> list[Decision]:
    """Decide every request in order: a placement for each kernel, or why it waits."""
    pool = [_Node(offer) for offer in nodes]
    return [_place_one(request, pool) for request in requests]


def _place_one(request: SessionRequest, pool: list[_Node]) -> Decision:
    for kernel in request.kernels:
        if fractional(kernel.slots):
            return Waiting(request.session_id, why_waiting(request.image, kernel.slots, []))
    chosen: list[tuple[_Node, ResourceSlots]] = []
    placements: dict[str, str] = {}
    for kernel in request.kernels:
        node = _best(pool, request.image, kernel.slots)
        if node is None:
            for taken, slots in chosen:  # all kernels or none: give back what was taken
                taken.take(slots, sign=-1)
            reason = why_waiting(request.image, kernel.slots, [n.now() for n in pool])
            return Waiting(request.session_id, reason)
        node.take(kernel.slots)
        chosen.append((node, kernel.slots))
        placements[kernel.kernel_id] = node.offer.node_id
    return Placed(request.session_id, placements)


def _best(pool: list[_Node], image: str, need: ResourceSlots) -> _Node | None:
    best: _Node | None = None
    for node in pool:
        offer = node.offer
        if not (offer.available and image in offer.images and node.fits(need)):
            continue
        if best is None or (node.gpu, offer.node_id) < (best.gpu, best.offer.node_id):
            best = node
    return best
