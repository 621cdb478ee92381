"""The ``node`` aggregate (``ev.node.<id>``): the scheduler's allocation ledger for one machine,
with its cordon and lost flags. The machine's agent starts what is allocated here."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from commands.aggregate import Aggregate
from commands.errors import DomainError
from events.domain.node import (
    KernelStopRequested,
    NodeCapacityChanged,
    NodeCordoned,
    NodeLost,
    NodeRecovered,
    NodeRegistered,
    NodeUncordoned,
    ResourcesAllocated,
    ResourcesReleased,
)
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType


class NodeUnavailableError(DomainError):
    """The node takes no new allocations (cordoned or lost)."""


class InsufficientCapacityError(DomainError):
    """An allocation does not fit in the node's free capacity."""


class AllocationConflictError(DomainError):
    """A kernel already holds a different allocation on this node."""


class Allocation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    session_id: str
    slots: ResourceSlots
    image: str = ""
    command: tuple[str, ...] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    stopping: bool = False


class Node(Aggregate):
    aggregate_type = AggregateType.NODE

    class State(BaseModel):
        hostname: str
        resource_group: str
        capacity: ResourceSlots
        allocations: dict[str, Allocation]
        cordoned: bool
        lost: bool

    def __init__(self) -> None:
        self.hostname = ""
        self.resource_group = ""
        self.capacity = ResourceSlots()
        # Keyed by kernel id: allocating is a set operation, so a retried decision cannot
        # count the same kernel twice (the drift Backend.AI suffers with bare counters).
        self.allocations: dict[str, Allocation] = {}
        self.cordoned = False
        self.lost = False

    @property
    def allocated(self) -> ResourceSlots:
        total = ResourceSlots()
        for allocation in self.allocations.values():
            total = total + allocation.slots
        return total

    @property
    def free(self) -> ResourceSlots:
        """Capacity not allocated. Never negative: capacity may shrink below what is allocated
        (the machine lost a device), and then nothing is free until enough is released."""
        used = self.allocated
        return ResourceSlots(
            cpu_milli=max(0, self.capacity.cpu_milli - used.cpu_milli),
            memory_bytes=max(0, self.capacity.memory_bytes - used.memory_bytes),
            gpu_hundredths=max(0, self.capacity.gpu_hundredths - used.gpu_hundredths),
        )

    @property
    def schedulable(self) -> bool:
        return not (self.cordoned or self.lost)

    # ---- commands ------------------------------------------------------------------------

    @classmethod
    def register(
        cls,
        node_id: str,
        hostname: str,
        resource_group: str,
        capacity: ResourceSlots,
        now: datetime,
    ) -> Node:
        return cls._create(
            cls.Registered,
            id=node_id,
            timestamp=now,
            hostname=hostname,
            resource_group=resource_group,
            capacity=capacity,
        )

    def change_capacity(self, capacity: ResourceSlots, now: datetime) -> bool:
        if capacity == self.capacity:
            return False
        return self._trigger(self.CapacityChanged, now, capacity=capacity)

    def allocate(
        self,
        kernel_id: str,
        session_id: str,
        slots: ResourceSlots,
        now: datetime,
        *,
        image: str = "",
        command: tuple[str, ...] | None = None,
        env: dict[str, str] | None = None,
    ) -> bool:
        """Set ``slots`` aside for a kernel and say what it runs. The same allocation again
        changes nothing."""
        held = self.allocations.get(kernel_id)
        wanted = Allocation(
            session_id=session_id, slots=slots, image=image, command=command, env=env or {}
        )
        if held is not None and held.model_copy(update={"stopping": False}) == wanted:
            return False
        if held is not None:
            raise AllocationConflictError(
                f"node {self.id}: kernel {kernel_id} already holds {held.slots} "
                f"for session {held.session_id}"
            )
        if self.lost:
            raise NodeUnavailableError(f"node {self.id} is lost")
        if self.cordoned:
            raise NodeUnavailableError(f"node {self.id} is cordoned")
        if not slots.fits_in(self.free):
            short = ", ".join(slots.shortfall(self.free))
            raise InsufficientCapacityError(f"node {self.id}: not enough free {short}")
        return self._trigger(
            self.Allocated,
            now,
            kernel_id=kernel_id,
            session_id=session_id,
            slots=slots,
            image=image,
            command=command,
            env=env or {},
        )

    def request_stop(self, kernel_id: str, reason: str, now: datetime) -> bool:
        """Ask the agent to stop a kernel; unknown or already stopping kernels change nothing."""
        held = self.allocations.get(kernel_id)
        if held is None or held.stopping:
            return False
        return self._trigger(self.StopRequested, now, kernel_id=kernel_id, reason=reason)

    def release(self, kernel_id: str, reason: str, now: datetime) -> bool:
        """Give a kernel's slots back; releasing what is not held changes nothing."""
        if kernel_id not in self.allocations:
            return False
        return self._trigger(self.Released, now, kernel_id=kernel_id, reason=reason)

    def cordon(self, reason: str, now: datetime) -> bool:
        if self.cordoned:
            return False
        return self._trigger(self.Cordoned, now, reason=reason)

    def uncordon(self, reason: str, now: datetime) -> bool:
        if not self.cordoned:
            return False
        return self._trigger(self.Uncordoned, now, reason=reason)

    def mark_lost(self, reason: str, now: datetime) -> bool:
        """Stop allocating here. Releases nothing by itself: the scheduler releases each
        kernel explicitly as it ends the kernel's session."""
        if self.lost:
            return False
        return self._trigger(self.Lost, now, reason=reason)

    def recover(self, reason: str, now: datetime) -> bool:
        if not self.lost:
            return False
        return self._trigger(self.Recovered, now, reason=reason)

    # ---- events --------------------------------------------------------------------------

    class Registered(NodeRegistered, Aggregate.Created):
        def apply(self, node: Node) -> None:
            node.hostname = self.hostname
            node.resource_group = self.resource_group
            node.capacity = self.capacity

    class CapacityChanged(NodeCapacityChanged, Aggregate.Event):
        def apply(self, node: Node) -> None:
            node.capacity = self.capacity

    class Allocated(ResourcesAllocated, Aggregate.Event):
        def apply(self, node: Node) -> None:
            node.allocations[self.kernel_id] = Allocation(
                session_id=self.session_id,
                slots=self.slots,
                image=self.image,
                command=self.command,
                env=self.env,
            )

    class StopRequested(KernelStopRequested, Aggregate.Event):
        def apply(self, node: Node) -> None:
            held = node.allocations[self.kernel_id]
            node.allocations[self.kernel_id] = held.model_copy(update={"stopping": True})

    class Released(ResourcesReleased, Aggregate.Event):
        def apply(self, node: Node) -> None:
            node.allocations.pop(self.kernel_id, None)

    class Cordoned(NodeCordoned, Aggregate.Event):
        def apply(self, node: Node) -> None:
            node.cordoned = True

    class Uncordoned(NodeUncordoned, Aggregate.Event):
        def apply(self, node: Node) -> None:
            node.cordoned = False

    class Lost(NodeLost, Aggregate.Event):
        def apply(self, node: Node) -> None:
            node.lost = True

    class Recovered(NodeRecovered, Aggregate.Event):
        def apply(self, node: Node) -> None:
            node.lost = False
