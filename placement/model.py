"""What placement takes and gives: plain frozen values (no validation in the hot loop). Pure;
reads and writes no subject."""

from __future__ import annotations

from dataclasses import dataclass

from placement.fairshare import Standing
from schemas.devices import DeviceShare
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode


@dataclass(frozen=True, slots=True)
class DeviceState:
    """One device of a node as the ledger holds it now."""

    index: int
    uuid: str
    numa_node: int | None
    whole: bool
    """Held whole by a kernel."""
    shared: int
    """Hundredths held as shares (0..100)."""
    mig: bool = False
    """MIG mode is on: the device takes no shares."""


@dataclass(frozen=True, slots=True)
class NodeOffer:
    """One node as placement sees it: what it has, what is free now, what it can run."""

    node_id: str
    hostname: str
    capacity: ResourceSlots
    free: ResourceSlots
    images: frozenset[str]
    available: bool = True
    """False when cordoned or lost: it takes no new work."""
    devices: tuple[DeviceState, ...] = ()
    """Its GPUs. A node with GPU capacity but no devices listed takes no GPU request (the
    allocation must name devices)."""
    volumes: frozenset[str] = frozenset()
    """The storage volumes mounted there: only sessions whose folders lie on them come here."""

    @property
    def name(self) -> str:
        return self.hostname or self.node_id


@dataclass(frozen=True, slots=True)
class KernelRequest:
    kernel_id: str
    slots: ResourceSlots


@dataclass(frozen=True, slots=True)
class SessionRequest:
    session_id: str
    image: str
    kernels: tuple[KernelRequest, ...]
    priority: int = 10
    owner: str = ""
    """DRF's identity: the access key."""
    account: tuple[str, str, str] = ("", "", "")
    """Fair share's identity: (domain, project id, user id)."""
    order: int = 0
    """Arrival order (smaller is older)."""
    waiting_since: float = 0.0
    """Seconds, on the clock of ``Placer.place``'s ``now``."""
    cluster_mode: ClusterMode = ClusterMode.SINGLE_NODE
    volumes: frozenset[str] = frozenset()
    """The volumes its folders lie on: every kernel goes to a node that has them all."""
    pullable: bool = False
    """Its image comes from a registry: a node that lacks it may take it (and pull it);
    one that holds it is preferred when the group's ``image_locality`` says so."""


@dataclass(frozen=True, slots=True)
class KernelPlacement:
    node_id: str
    devices: tuple[DeviceShare, ...] = ()
    numa_node: int | None = None
    """The NUMA node of its devices when they all share one (the agent pins cpus to it)."""


@dataclass(frozen=True, slots=True)
class Placed:
    session_id: str
    kernels: dict[str, KernelPlacement]

    @property
    def placements(self) -> dict[str, str]:
        """Kernel id -> node id."""
        return {kernel_id: placed.node_id for kernel_id, placed in self.kernels.items()}


@dataclass(frozen=True, slots=True)
class Waiting:
    session_id: str
    reason: str
    position: int = 0
    """1-based place among those left waiting in the group, in queue order."""
    fair_share: Standing | None = None
    """Its owner's standing, in a fair-share group."""


Decision = Placed | Waiting
