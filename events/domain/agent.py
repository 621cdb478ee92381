"""Events of the ``agent`` aggregate (``ev.agent.<id>``): facts the agent on one machine reports
about itself. Written only by that agent; the scheduler turns kernel facts into session changes.
"""

from __future__ import annotations

from events.catalogue import Event, Payload, event, upcaster
from schemas.devices import DeviceInfo, NumaNode
from schemas.images import PullCause, PulledLayer
from schemas.resources import ResourceSlots
from schemas.service_ports import ReportedPort
from schemas.subjects import AggregateType

AGENT = AggregateType.AGENT


@event("AgentRegistered", AGENT, version=2)
class AgentRegistered(Event):
    """The agent (re)started. ``epoch`` grows with every registration: containers whose
    allocation was released while the agent was away are killed before it registers again.

    v2 added ``backend``: see ``_registered_v1_to_v2``.
    """

    epoch: int
    hostname: str
    backend: str
    capacity: ResourceSlots
    devices: tuple[DeviceInfo, ...] = ()
    images: tuple[str, ...] = ()
    resource_group: str = "default"
    numa: tuple[NumaNode, ...] = ()
    """The machine's NUMA nodes and their CPUs (empty when not reported, and in older events)."""
    volumes: tuple[str, ...] = ()
    """The storage volumes mounted on the machine (``JETYARD_AGENT_VOLUMES``' names), sorted:
    placement puts a session whose folders lie on a volume only where it is. Empty in older
    events, and then the machine takes no session with folders."""
    terminal_url: str = ""
    """Where the agent serves its kernels' terminals (``ws://host:port``; the app proxy alone
    can open one, with the terminal key). Empty: no terminal endpoint (the simulated backend,
    no key set, older events)."""
    address: str = ""
    """The machine's underlay IPv4 address (``JETYARD_AGENT_ADDRESS``, else the source address of
    its route to NATS): where the other nodes of a multi-node cluster session send its VXLAN
    packets. Empty in older events: a multi-node session's kernel placed there fails to start
    (its peers could not reach it)."""


@upcaster("AgentRegistered", from_version=1)
def _registered_v1_to_v2(payload: Payload) -> Payload:
    # Every v1 agent ran containers on Docker: the simulated backend came with v2. A default
    # on the field would be wrong for new events, which must say which backend they use.
    return {**payload, "backend": "docker"}


@event("AgentImagesChanged", AGENT)
class AgentImagesChanged(Event):
    """The images present on the machine now (the whole set, not a difference)."""

    images: tuple[str, ...]


@event("KernelStarted", AGENT)
class KernelStarted(Event):
    """A kernel's container is running (container names derive from the kernel id)."""

    kernel_id: str
    session_id: str
    container_id: str


@event("KernelServicePortsReported", AGENT)
class KernelServicePortsReported(Event):
    """What became of a running kernel's apps (its image's service ports): each open, or
    never opened within the agent's bound, with the address the app proxy reaches it at.
    Written once per kernel, after its start, and only for images that declare apps."""

    kernel_id: str
    session_id: str
    ports: tuple[ReportedPort, ...]


@event("KernelFailedToStart", AGENT)
class KernelFailedToStart(Event):
    kernel_id: str
    session_id: str
    reason: str


@event("KernelExited", AGENT)
class KernelExited(Event):
    """A running kernel's container ended, with its exit code."""

    kernel_id: str
    session_id: str
    exit_code: int
    reason: str


# ---- image pulls: one pull per image per node, however many kernels wait for it -----------


@event("ImagePullStarted", AGENT)
class ImagePullStarted(Event):
    """The agent began pulling ``reference`` for the kernels that wait for it (kernel id ->
    session id). A pull resumed after the agent restarted starts again (layers already on
    disk are not fetched twice)."""

    reference: str
    kernels: dict[str, str] = {}


@event("ImagePullProgressed", AGENT)
class ImagePullProgressed(Event):
    """How far a pull is: bytes fetched and to fetch, in all and per layer. Throttled by the
    agent (``pull_progress_interval_s``), with a last one at the total before it finishes."""

    reference: str
    done_bytes: int
    total_bytes: int
    layers: tuple[PulledLayer, ...] = ()
    kernels: dict[str, str] = {}


@event("ImagePullFinished", AGENT)
class ImagePullFinished(Event):
    reference: str
    digest: str = ""
    kernels: dict[str, str] = {}


@event("ImagePullFailed", AGENT)
class ImagePullFailed(Event):
    """The pull failed; each waiting kernel's ``KernelFailedToStart`` follows with the same
    reason, which ends its session."""

    reference: str
    cause: PullCause
    reason: str
    kernels: dict[str, str] = {}


@event("ImagePurged", AGENT)
class ImagePurged(Event):
    """The agent's answer to an ``ImagePurgeRequested`` (at ``request_seq`` on its ledger):
    the image removed (``freed_bytes``), or ``refused`` with why (a kernel uses it)."""

    reference: str
    request_seq: int
    freed_bytes: int = 0
    refused: str = ""
