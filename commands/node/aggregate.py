"""The ``node`` aggregate (``ev.node.<id>``): the scheduler's allocation ledger for one machine,
with its cordon and lost flags. The machine's agent starts what is allocated here.

This module decides and keeps the derived tallies; the events and how each evolves the ledger
are ``commands.node.events``'s, ``Allocation`` and the errors ``commands.node.rules``'s, the
device-level rules ``commands.node.devices``'s."""

from __future__ import annotations

from datetime import datetime
from typing import Self

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.node import devices as node_devices
from commands.node import events
from commands.node.devices import DeviceTally, check_devices, tally_of
from commands.node.rules import (
    Allocation,
    AllocationConflictError,
    InsufficientCapacityError,
    NodeBusyError,
    NodeUnavailableError,
    UnknownNumaNodeError,
)
from events.snapshots import Snapshot
from schemas.cluster_network import ClusterNetwork
from schemas.devices import DeviceInfo, DeviceShare, NumaNode
from schemas.images import ImageSource
from schemas.resources import ResourceSlots
from schemas.sandbox import SAFE_SANDBOX, Sandbox
from schemas.subjects import AggregateType
from schemas.vfolder import Mount


class Node(Aggregate):
    aggregate_type = AggregateType.NODE

    class State(BaseModel):
        hostname: str
        resource_group: str
        capacity: ResourceSlots
        # Defaults: snapshots taken before devices were recorded still load.
        devices: tuple[DeviceInfo, ...] = ()
        numa: tuple[NumaNode, ...] = ()
        allocations: dict[str, Allocation]
        cordoned: bool
        lost: bool
        draining: bool = False
        drain_deadline: datetime | None = None
        removed: bool = False

    def __init__(self) -> None:
        self.hostname = ""
        self.resource_group = ""
        self.capacity = ResourceSlots()
        self.devices: tuple[DeviceInfo, ...] = ()
        self.numa: tuple[NumaNode, ...] = ()
        # Keyed by kernel id: allocating is a set operation, so a retried decision cannot
        # count the same kernel twice (the drift Backend.AI suffers with bare counters).
        self.allocations: dict[str, Allocation] = {}
        self.cordoned = False
        self.lost = False
        self.draining = False
        """Cordoned, and its kernels are to end (drained once none is left)."""
        self.drain_deadline: datetime | None = None
        """When what still runs is stopped (None: it may run to its end)."""
        self.removed = False
        """Left the cluster for good: never placed on, its agent's registrations ignored."""
        # Who holds what on each device, kept as allocations come and go: the scheduler asks
        # every node for it on every pass. Derived, so not in ``State``; rebuilt on restore.
        self._devices_held: DeviceTally = {}
        # The sum of the allocations' slots (cpu, memory, gpu), kept the same way: ``free`` is
        # asked for every node on every pass. A tuple, so a shallow working copy is safe.
        self._used: tuple[int, int, int] = (0, 0, 0)

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot) -> Self:
        node = super().from_snapshot(snapshot)
        node._devices_held = tally_of(a.devices for a in node.allocations.values())
        node._used = (0, 0, 0)
        for allocation in node.allocations.values():
            node._count(allocation.slots, 1)
        return node

    def _count(self, slots: ResourceSlots, sign: int) -> None:
        cpu, memory, gpu = self._used
        self._used = (
            cpu + sign * slots.cpu_milli,
            memory + sign * slots.memory_bytes,
            gpu + sign * slots.gpu_hundredths,
        )

    def device_use(self) -> dict[int, tuple[bool, int]]:
        """Device index -> (held whole, hundredths shared), for every device of the node."""
        return node_devices.device_use(self.devices, self._devices_held)

    @property
    def allocated(self) -> ResourceSlots:
        cpu, memory, gpu = self._used
        return ResourceSlots(cpu_milli=cpu, memory_bytes=memory, gpu_hundredths=gpu)

    @property
    def free(self) -> ResourceSlots:
        """Capacity not allocated. Never negative: capacity may shrink below what is allocated
        (the machine lost a device), and then nothing is free until enough is released."""
        cpu, memory, gpu = self._used
        capacity = self.capacity
        return ResourceSlots(
            cpu_milli=max(0, capacity.cpu_milli - cpu),
            memory_bytes=max(0, capacity.memory_bytes - memory),
            gpu_hundredths=max(0, capacity.gpu_hundredths - gpu),
        )

    @property
    def schedulable(self) -> bool:
        return not (self.cordoned or self.lost or self.removed)

    # ---- commands ------------------------------------------------------------------------

    @classmethod
    def register(
        cls,
        node_id: str,
        hostname: str,
        resource_group: str,
        capacity: ResourceSlots,
        now: datetime,
        *,
        devices: tuple[DeviceInfo, ...] = (),
        numa: tuple[NumaNode, ...] = (),
    ) -> Node:
        return cls._create(
            cls.Registered,
            id=node_id,
            timestamp=now,
            hostname=hostname,
            resource_group=resource_group,
            capacity=capacity,
            devices=tuple(devices),
            numa=tuple(numa),
        )

    def change_capacity(
        self,
        capacity: ResourceSlots,
        now: datetime,
        *,
        devices: tuple[DeviceInfo, ...] = (),
        numa: tuple[NumaNode, ...] = (),
    ) -> bool:
        """Record other hardware. Allocations stay, even on devices that went away: they are
        given back only by release."""
        devices, numa = tuple(devices), tuple(numa)
        if (capacity, devices, numa) == (self.capacity, self.devices, self.numa):
            return False
        return self._trigger(
            self.CapacityChanged, now, capacity=capacity, devices=devices, numa=numa
        )

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
        devices: tuple[DeviceShare, ...] = (),
        hostname: str = "",
        numa_node: int | None = None,
        mounts: tuple[Mount, ...] = (),
        sandbox: Sandbox = SAFE_SANDBOX,
        source: ImageSource | None = None,
        cluster: ClusterNetwork | None = None,
        service_port: int | None = None,
    ) -> bool:
        """Set ``slots`` aside for a kernel, on exactly ``devices``, and say what it runs
        (with which folders mounted, in which sandbox). The same allocation again changes
        nothing."""
        held = self.allocations.get(kernel_id)
        wanted = Allocation(
            session_id=session_id,
            slots=slots,
            image=image,
            command=command,
            env=env or {},
            devices=tuple(devices),
            hostname=hostname,
            numa_node=numa_node,
            mounts=tuple(mounts),
            sandbox=sandbox,
            source=source,
            cluster=cluster,
            service_port=service_port,
        )
        if held is not None and held.model_copy(update={"stopping": False}) == wanted:
            return False
        if held is not None:
            raise AllocationConflictError(
                f"node {self.id}: kernel {kernel_id} already holds {held.slots} "
                f"for session {held.session_id}"
            )
        if self.removed:
            raise NodeUnavailableError(f"node {self.id} was removed from the cluster")
        if self.lost:
            raise NodeUnavailableError(f"node {self.id} is lost")
        if self.cordoned:
            raise NodeUnavailableError(f"node {self.id} is cordoned")
        if not slots.fits_in(self.free):
            short = ", ".join(slots.shortfall(self.free))
            raise InsufficientCapacityError(f"node {self.id}: not enough free {short}")
        check_devices(
            self.id, self.devices, self._devices_held, wanted.devices, slots.gpu_hundredths
        )
        if numa_node is not None and self.numa and numa_node not in {n.node for n in self.numa}:
            raise UnknownNumaNodeError(f"node {self.id} has no NUMA node {numa_node}")
        return self._trigger(
            self.Allocated,
            now,
            kernel_id=kernel_id,
            session_id=session_id,
            slots=slots,
            image=image,
            command=command,
            env=wanted.env,
            devices=wanted.devices,
            hostname=hostname,
            numa_node=numa_node,
            mounts=wanted.mounts,
            sandbox=sandbox,
            source=source,
            cluster=cluster,
            service_port=service_port,
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

    def request_purge(self, reference: str, reason: str, now: datetime) -> bool:
        """Ask the agent to remove an image (every request is written: the agent acts on each)."""
        return self._trigger(self.PurgeRequested, now, reference=reference, reason=reason)

    def cordon(self, reason: str, now: datetime) -> bool:
        if self.cordoned:
            return False
        return self._trigger(self.Cordoned, now, reason=reason)

    def drain(self, reason: str, deadline: datetime | None, now: datetime) -> bool:
        """Cordon, and let what runs end (by ``deadline`` if given). Draining again with the
        same deadline changes nothing; another deadline replaces it."""
        if self.draining and self.drain_deadline == deadline:
            return False
        return self._trigger(self.DrainRequested, now, reason=reason, deadline=deadline)

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

    def remove(self, reason: str, now: datetime) -> bool:
        """Take the machine out of the cluster for good. Only an empty node is removed: what
        runs there must end first (drain it), so no kernel is left without a ledger."""
        if self.removed:
            return False
        if self.allocations:
            raise NodeBusyError(
                f"node {self.hostname or self.id} still holds {len(self.allocations)} "
                "kernel(s): drain it first"
            )
        return self._trigger(self.Removed, now, reason=reason)

    # ---- events (``commands.node.events``) -----------------------------------------------

    Registered = events.Registered
    CapacityChanged = events.CapacityChanged
    Allocated = events.Allocated
    StopRequested = events.StopRequested
    Released = events.Released
    Cordoned = events.Cordoned
    PurgeRequested = events.PurgeRequested
    DrainRequested = events.DrainRequested
    Uncordoned = events.Uncordoned
    Lost = events.Lost
    Recovered = events.Recovered
    Removed = events.Removed
