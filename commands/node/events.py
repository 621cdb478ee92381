"""How each event of the ``node`` aggregate (``ev.node.<id>``) evolves the allocation ledger:
every class pairs a catalogue event with ``apply``. ``Node`` binds them in its body, so they are
its nested event classes (``Node.Allocated``) and keep its derived tallies. Pure; no subjects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.aggregate import Aggregate
from commands.node import devices as node_devices
from commands.node.rules import Allocation
from events.domain.node import (
    ImagePurgeRequested,
    KernelStopRequested,
    NodeCapacityChanged,
    NodeCordoned,
    NodeDrainRequested,
    NodeLost,
    NodeRecovered,
    NodeRegistered,
    NodeRemoved,
    NodeUncordoned,
    ResourcesAllocated,
    ResourcesReleased,
)
from schemas.trusted import trusted

if TYPE_CHECKING:
    from commands.node.aggregate import Node


class Registered(NodeRegistered, Aggregate.Created):
    def apply(self, node: Node) -> None:
        node.hostname = self.hostname
        node.resource_group = self.resource_group
        node.capacity = self.capacity
        node.devices = self.devices
        node.numa = self.numa


class CapacityChanged(NodeCapacityChanged, Aggregate.Event):
    def apply(self, node: Node) -> None:
        node.capacity = self.capacity
        node.devices = self.devices
        node.numa = self.numa


class Allocated(ResourcesAllocated, Aggregate.Event):
    def apply(self, node: Node) -> None:
        replaced = node.allocations.get(self.kernel_id)
        if replaced is not None:  # never decided (allocations are a set), but never drift
            node_devices.add(node._devices_held, replaced.devices, sign=-1)
            node._count(replaced.slots, -1)
        # From the event's validated fields: not validated again (every ledger fold does this).
        node.allocations[self.kernel_id] = trusted(
            Allocation,
            {
                "session_id": self.session_id,
                "slots": self.slots,
                "image": self.image,
                "command": self.command,
                "env": self.env,
                "devices": self.devices,
                "hostname": self.hostname,
                "numa_node": self.numa_node,
                "mounts": self.mounts,
                "sandbox": self.sandbox,
                "source": self.source,
                "cluster": self.cluster,
                "service_port": self.service_port,
                "stopping": False,
            },
        )
        node_devices.add(node._devices_held, self.devices)
        node._count(self.slots, 1)


class StopRequested(KernelStopRequested, Aggregate.Event):
    def apply(self, node: Node) -> None:
        held = node.allocations[self.kernel_id]
        node.allocations[self.kernel_id] = held.model_copy(update={"stopping": True})


class Released(ResourcesReleased, Aggregate.Event):
    def apply(self, node: Node) -> None:
        gone = node.allocations.pop(self.kernel_id, None)
        if gone is not None:
            node_devices.add(node._devices_held, gone.devices, sign=-1)
            node._count(gone.slots, -1)


class Cordoned(NodeCordoned, Aggregate.Event):
    def apply(self, node: Node) -> None:
        node.cordoned = True


class PurgeRequested(ImagePurgeRequested, Aggregate.Event):
    pass  # for the agent to act on; the ledger's own state does not change


class DrainRequested(NodeDrainRequested, Aggregate.Event):
    def apply(self, node: Node) -> None:
        node.cordoned = True
        node.draining = True
        node.drain_deadline = self.deadline


class Uncordoned(NodeUncordoned, Aggregate.Event):
    def apply(self, node: Node) -> None:
        node.cordoned = False
        node.draining = False
        node.drain_deadline = None


class Lost(NodeLost, Aggregate.Event):
    def apply(self, node: Node) -> None:
        node.lost = True


class Recovered(NodeRecovered, Aggregate.Event):
    def apply(self, node: Node) -> None:
        node.lost = False


class Removed(NodeRemoved, Aggregate.Event):
    def apply(self, node: Node) -> None:
        node.removed = True
