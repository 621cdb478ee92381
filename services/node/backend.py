"""The container backend protocol the agent drives (docker or simulated). Reads and writes no
subjects: backends see only the machine."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal, Protocol

from schemas.cluster_network import ClusterNetwork
from schemas.devices import DeviceShare
from schemas.resources import ResourceSlots
from schemas.sandbox import SAFE_SANDBOX, Sandbox
from services.node.image_budget import LocalImage
from services.node.pulls import ProgressCallback, RegistryAuth

# Labels on every container the agent creates: the agent finds its containers by these alone
# (never by a list kept in memory), so a restarted agent sees exactly what runs.
LABEL_MANAGED = "jetyard.managed"
LABEL_CLUSTER = "jetyard.cluster_id"
LABEL_NODE = "jetyard.node_id"
LABEL_KERNEL = "jetyard.kernel_id"
LABEL_SESSION = "jetyard.session_id"

ContainerStatus = Literal["created", "running", "exited"]
"""created: made but never started; running: a process may run; exited: it ended."""


def container_name(kernel_id: str) -> str:
    """One name per kernel: creating it twice collides (409) instead of running it twice."""
    return f"jy-{kernel_id}"


def owner_labels(cluster_id: str, node_id: str) -> dict[str, str]:
    """The labels that make a container this node's: its installation's and its own id (an
    agent without a cluster id has only the node's). A backend lists and watches exactly the
    containers carrying all of them, so two agents on one engine never see each other's."""
    owner = {LABEL_MANAGED: "true", LABEL_NODE: node_id}
    if cluster_id:
        owner[LABEL_CLUSTER] = cluster_id
    return owner


def labels_for(cluster_id: str, node_id: str, kernel_id: str, session_id: str) -> dict[str, str]:
    return {
        **owner_labels(cluster_id, node_id),
        LABEL_KERNEL: kernel_id,
        LABEL_SESSION: session_id,
    }


def last_bytes(text: str, max_bytes: int) -> str:
    """The end of ``text`` that fits in ``max_bytes`` of UTF-8 (a cut character is dropped)."""
    data = text.encode()
    return text if len(data) <= max_bytes else data[-max_bytes:].decode(errors="ignore")


@dataclass(frozen=True, slots=True)
class HostMount:
    """A virtual folder bind-mounted into a kernel: its directory on this machine, ``root`` (the
    volume's root here) / ``relpath`` (the folder's layout under it), at ``target`` inside."""

    folder_id: str
    name: str
    volume: str
    root: Path
    relpath: PurePosixPath
    target: str
    read_only: bool

    @property
    def source(self) -> Path:
        return self.root / self.relpath


@dataclass(frozen=True, slots=True)
class KernelSpec:
    """What to run for one kernel: taken from its allocation on the node ledger, plus what
    only this machine knows (its devices' memory, its NUMA node's CPUs)."""

    kernel_id: str
    session_id: str
    image: str
    command: tuple[str, ...] | None
    env: dict[str, str] = field(default_factory=dict)
    slots: ResourceSlots = field(default_factory=ResourceSlots)
    devices: tuple[DeviceShare, ...] = ()
    """Exactly the devices the ledger gave it, whole or in shares."""
    device_memory_bytes: dict[str, int] = field(default_factory=dict)
    """Memory of each device it holds, by uuid (for MPS memory limits on shares)."""
    hostname: str = ""
    """The container's host name ("": the engine's default)."""
    cpuset: tuple[int, ...] = ()
    """CPUs to pin it to (those of its devices' NUMA node); empty: not pinned."""
    mounts: tuple[HostMount, ...] = ()
    """Its session's folders, resolved to this machine's directories (``services.node.mounts``)."""
    sandbox: Sandbox = SAFE_SANDBOX
    """What its container may do (its allocation's: its resource group's settings)."""
    cluster: ClusterNetwork | None = None
    """Its session's overlay network, when the session spans nodes (``services.node.overlay``)."""


@dataclass(frozen=True, slots=True)
class Container:
    """One of this node's containers as the backend sees it now."""

    kernel_id: str
    session_id: str
    container_id: str
    status: ContainerStatus
    exit_code: int | None = None
    """Known once exited."""
    oom_killed: bool = False


@dataclass(frozen=True, slots=True)
class OutputLine:
    """One line a kernel printed (stdout or stderr), without its newline."""

    text: str
    at_ns: int
    """When the engine took it (ns since the epoch): never decreasing within a kernel, so a
    follower resumes after a known line by asking from its time (``Backend.follow``)."""


class StartFailedError(Exception):
    """A kernel cannot start here for a reason retrying will not fix (unknown image, refused
    configuration). The message is shown to the user, so it says what is wrong."""


class BackendUnavailableError(Exception):
    """The backend cannot be reached at all (no Docker socket, engine down)."""


class Backend(Protocol):
    @property
    def name(self) -> str:
        """Reported in ``AgentRegistered.backend`` ("docker", "simulated")."""
        ...

    @property
    def node_id(self) -> str:
        """The node whose containers this backend makes and sees: the agent acts under the
        same id, so what it reports and what it finds by label cannot disagree."""
        ...

    async def images(self) -> list[str]:
        """Image references (tags) present on the machine."""
        ...

    async def has_image(self, ref: str) -> bool:
        """Whether ``ref`` (a tag, or ``repo@digest``) is present."""
        ...

    async def pull(self, ref: str, auth: RegistryAuth | None, progress: ProgressCallback) -> str:
        """Pull ``ref`` from its registry, calling ``progress`` as bytes arrive; returns its
        digest. Raises ``services.node.pulls.PullFailedError`` with the cause."""
        ...

    async def local_images(self) -> list[LocalImage]:
        """Every image on the machine, with its size and names."""
        ...

    async def remove_image(self, ref: str) -> int:
        """Remove an image (its bytes freed, 0 when missing or kept by another name);
        ``ImageInUseError`` while a container uses it."""
        ...

    async def containers(self) -> list[Container]:
        """Every container of this node (by label), whatever its status."""
        ...

    async def start(self, spec: KernelSpec) -> str:
        """Create and start the kernel's container and return its id. Idempotent: if the
        container exists already, start it if it never started, and return its id.
        Raises ``StartFailedError`` when it cannot run here (a folder's directory missing
        included: ``services.node.mounts.check_host_mounts``)."""
        ...

    async def stop(self, container_id: str, timeout_s: float) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``; stopping a gone or exited one is a no-op."""
        ...

    async def logs(self, container_id: str, max_bytes: int) -> str:
        """Its stdout and stderr so far (the last ``max_bytes``)."""
        ...

    def follow(self, container_id: str, since_ns: int) -> AsyncGenerator[OutputLine, None]:
        """Its output lines in order, from those taken at ``since_ns`` or later (earlier ones
        may come too: the caller skips them), then each new one as it is printed; ends once
        the container has exited and everything is delivered (at once for an exited or gone
        one)."""
        ...

    async def remove(self, container_id: str) -> None:
        """Remove a container; removing a gone one is a no-op."""
        ...

    async def cpu_seconds(self, container_id: str) -> float | None:
        """The CPU time its processes used so far (user and system, every CPU), or None when
        the engine cannot say (gone, not running)."""
        ...

    async def watch(self, changed: Callable[[], None]) -> None:
        """Call ``changed()`` whenever one of this node's containers may have changed status,
        and once after (re)subscribing, since changes may have been missed meanwhile. Runs
        until cancelled."""
        ...

    async def close(self) -> None: ...
