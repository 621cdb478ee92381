"""The node ledger's value types and errors (``commands.node``): what it holds for one kernel
(``Allocation``) and the errors allocating raises. Pure; no subjects. Device-level rules are in
``commands.node.devices``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from commands.errors import DomainError
from schemas.cluster_network import ClusterNetwork
from schemas.devices import DeviceShare
from schemas.images import ImageSource
from schemas.resources import ResourceSlots
from schemas.sandbox import SAFE_SANDBOX, Sandbox
from schemas.vfolder import Mount


class NodeUnavailableError(DomainError):
    """The node takes no new allocations (cordoned or lost)."""


class NodeBusyError(DomainError):
    """The node still holds allocations, so it cannot be removed."""


class InsufficientCapacityError(DomainError):
    """An allocation does not fit in the node's free capacity."""


class AllocationConflictError(DomainError):
    """A kernel already holds a different allocation on this node."""


class UnknownNumaNodeError(DomainError):
    """The allocation names a NUMA node this node does not report."""


class Allocation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    session_id: str
    slots: ResourceSlots
    image: str = ""
    command: tuple[str, ...] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    devices: tuple[DeviceShare, ...] = ()
    hostname: str = ""
    """The container's host name ("" : the engine's default)."""
    numa_node: int | None = None
    """The NUMA node of its devices, when they share one: the agent pins the CPUs there."""
    mounts: tuple[Mount, ...] = ()
    """Its session's folders, bind-mounted by the agent."""
    sandbox: Sandbox = SAFE_SANDBOX
    """What its container may do (its resource group's settings when it was placed)."""
    source: ImageSource | None = None
    """Where its image is pulled from (None: the node must hold it)."""
    cluster: ClusterNetwork | None = None
    """Its session's overlay network, for a session on more than one node."""
    service_port: int | None = None
    """An inference session's server port: the agent reports it as the app ``inference``."""
    stopping: bool = False
