"""Events of the ``node`` aggregate (``ev.node.<id>``): the scheduler's allocation ledger for one
machine. Written only by the scheduler; the machine's agent reads its allocations from here."""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from events.catalogue import Event, event
from schemas.cluster_network import ClusterNetwork
from schemas.devices import DeviceInfo, DeviceShare, NumaNode
from schemas.images import ImageSource
from schemas.resources import ResourceSlots
from schemas.sandbox import SAFE_SANDBOX, Sandbox
from schemas.subjects import AggregateType
from schemas.vfolder import Mount

NODE = AggregateType.NODE


@event("NodeRegistered", NODE)
class NodeRegistered(Event):
    """The scheduler admitted a machine into a resource group with this capacity, these
    devices and this NUMA layout (the last two empty in events written before devices)."""

    hostname: str
    resource_group: str
    capacity: ResourceSlots
    devices: tuple[DeviceInfo, ...] = ()
    numa: tuple[NumaNode, ...] = ()


@event("NodeCapacityChanged", NODE)
class NodeCapacityChanged(Event):
    """The machine's capacity, devices or NUMA layout changed (the agent re-registered with
    other hardware)."""

    capacity: ResourceSlots
    devices: tuple[DeviceInfo, ...] = ()
    numa: tuple[NumaNode, ...] = ()


@event("ResourcesAllocated", NODE)
class ResourcesAllocated(Event):
    """Slots were set aside for one kernel. Keyed by kernel id: allocations are a set.

    It also says what to run, so the ledger alone is the agent's desired state: the devices
    the kernel holds (whole or shares), its container host name (cluster sessions) and the NUMA
    node its devices sit on (the agent pins its CPUs there)."""

    kernel_id: str
    session_id: str
    slots: ResourceSlots
    image: str = ""
    command: tuple[str, ...] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    devices: tuple[DeviceShare, ...] = ()
    hostname: str = ""
    numa_node: int | None = None
    mounts: tuple[Mount, ...] = ()
    """Its session's folders: the agent mounts each from ``<volume root>/<folder path>``."""
    sandbox: Sandbox = SAFE_SANDBOX
    """What its container may do: its resource group's, when it was placed. An event written
    before allocations carried it loads with the safe defaults."""
    source: ImageSource | None = None
    """Where its image comes from, for an image found in a registry: the agent pulls it
    (``schemas.images``) when the node lacks it or the policy says so. None: the node must
    hold the image already."""
    cluster: ClusterNetwork | None = None
    """The session's overlay network, for a cluster session whose kernels are on more than one
    node: the same for all its kernels (``schemas.cluster_network``). None: a single kernel, or
    a cluster session on one node (its kernels share that node's session bridge)."""
    service_port: int | None = None
    """An inference session's model server port (``SessionSpec.service_port``): the agent
    reports it as the app ``inference`` once the kernel runs. None for other sessions."""


@event("KernelStopRequested", NODE)
class KernelStopRequested(Event):
    """The kernel should stop (its session is terminating). Its slots stay allocated until the
    agent reports the exit; then the scheduler releases them."""

    kernel_id: str
    reason: str


@event("ResourcesReleased", NODE)
class ResourcesReleased(Event):
    """A kernel's slots were given back (it ended, or its node was lost)."""

    kernel_id: str
    reason: str


@event("NodeCordoned", NODE)
class NodeCordoned(Event):
    """No new allocations; running kernels stay."""

    reason: str


@event("ImagePurgeRequested", NODE)
class ImagePurgeRequested(Event):
    """An operator asked the node's agent to remove an image from its disk: it does unless a
    kernel there uses it, and reports ``ImagePurged`` either way."""

    reference: str
    reason: str


@event("NodeDrainRequested", NODE)
class NodeDrainRequested(Event):
    """Cordoned, and its running kernels are to end: by themselves, or stopped at
    ``deadline`` when one is given. Uncordoning ends the drain."""

    reason: str
    deadline: AwareDatetime | None = None


@event("NodeUncordoned", NODE)
class NodeUncordoned(Event):
    reason: str


@event("NodeLost", NODE)
class NodeLost(Event):
    """The machine's heartbeat expired. Allocations are released by explicit events, one per
    kernel, so the ledger never forgets what it gave back."""

    reason: str


@event("NodeRecovered", NODE)
class NodeRecovered(Event):
    """A lost machine is back (re-registered under a new epoch) and may take work again."""

    reason: str


@event("NodeRemoved", NODE)
class NodeRemoved(Event):
    """The machine left the cluster for good: nothing is placed on it again, its agent's
    registrations are ignored and it may not join again. Decided only when it held nothing."""

    reason: str
