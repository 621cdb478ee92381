"""The ``agent`` aggregate (``ev.agent.<id>``): what the agent on one machine reports about itself
(hardware, images, its kernels' starts and exits). Written only by that agent."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, ConfigDict

from commands.aggregate import Aggregate
from commands.errors import DomainError
from events.domain.agent import (
    AgentImagesChanged,
    AgentRegistered,
    ImagePullFailed,
    ImagePullFinished,
    ImagePullProgressed,
    ImagePullStarted,
    ImagePurged,
    KernelExited,
    KernelFailedToStart,
    KernelServicePortsReported,
    KernelStarted,
)
from schemas.devices import DeviceInfo, NumaNode
from schemas.images import PullCause, PulledLayer
from schemas.resources import ResourceSlots
from schemas.service_ports import ReportedPort
from schemas.subjects import AggregateType


class StaleEpochError(DomainError):
    """A registration does not carry a newer epoch: an older incarnation of the agent."""


class KernelConflictError(DomainError):
    """A kernel fact contradicts what the agent already reported."""


class RunningKernel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    session_id: str
    container_id: str
    ports_reported: bool = False
    """Its service ports are on the log (a default: older snapshots predate them)."""


class Agent(Aggregate):
    aggregate_type = AggregateType.AGENT

    class State(BaseModel):
        epoch: int
        hostname: str
        backend: str
        capacity: ResourceSlots
        devices: tuple[DeviceInfo, ...]
        numa: tuple[NumaNode, ...] = ()  # a default: older snapshots have none
        images: tuple[str, ...]
        volumes: tuple[str, ...] = ()  # a default: older snapshots have none
        running: dict[str, RunningKernel]
        pulling: dict[str, dict[str, str]] = {}  # a default: older snapshots have none
        purged_seq: int = 0  # a default: older snapshots have none

    def __init__(self) -> None:
        self.epoch = 0
        self.hostname = ""
        self.backend = ""
        self.capacity = ResourceSlots()
        self.devices: tuple[DeviceInfo, ...] = ()
        self.numa: tuple[NumaNode, ...] = ()
        self.images: tuple[str, ...] = ()
        self.volumes: tuple[str, ...] = ()
        # Kernel id -> its container: survives re-registration, because a restarted agent
        # re-attaches its containers and reports exits that happened while it was down.
        self.running: dict[str, RunningKernel] = {}
        # Image reference -> the kernels (and their sessions) its pull in flight serves:
        # what a restarted agent finds unfinished, and what operators see per node.
        self.pulling: dict[str, dict[str, str]] = {}
        self.purged_seq = 0
        """The ledger position of the last purge request answered (``ImagePurged``)."""

    # ---- commands ------------------------------------------------------------------------

    @classmethod
    def register(
        cls,
        agent_id: str,
        *,
        epoch: int,
        hostname: str,
        backend: str,
        capacity: ResourceSlots,
        devices: Iterable[DeviceInfo] = (),
        numa: Iterable[NumaNode] = (),
        images: Iterable[str] = (),
        resource_group: str = "default",
        volumes: Iterable[str] = (),
        terminal_url: str = "",
        address: str = "",
        now: datetime,
    ) -> Agent:
        """The first registration of this machine's agent."""
        if epoch < 1:
            raise StaleEpochError(f"agent {agent_id}: epochs start at 1, got {epoch}")
        return cls._create(
            cls.Registered,
            id=agent_id,
            timestamp=now,
            epoch=epoch,
            hostname=hostname,
            backend=backend,
            capacity=capacity,
            devices=tuple(devices),
            numa=tuple(numa),
            images=_name_set(images),
            resource_group=resource_group,
            volumes=_name_set(volumes),
            terminal_url=terminal_url,
            address=address,
        )

    def reregister(
        self,
        *,
        epoch: int,
        hostname: str,
        backend: str,
        capacity: ResourceSlots,
        devices: Iterable[DeviceInfo] = (),
        numa: Iterable[NumaNode] = (),
        images: Iterable[str] = (),
        resource_group: str = "default",
        volumes: Iterable[str] = (),
        terminal_url: str = "",
        address: str = "",
        now: datetime,
    ) -> bool:
        """A restarted agent registers again. Its epoch must grow: a stale incarnation (a
        partitioned machine coming back) must not speak for the current one."""
        if epoch <= self.epoch:
            raise StaleEpochError(
                f"agent {self.id}: epoch {epoch} is not newer than the current {self.epoch}"
            )
        return self._trigger(
            self.Reregistered,
            now,
            epoch=epoch,
            hostname=hostname,
            backend=backend,
            capacity=capacity,
            devices=tuple(devices),
            numa=tuple(numa),
            images=_name_set(images),
            resource_group=resource_group,
            volumes=_name_set(volumes),
            terminal_url=terminal_url,
            address=address,
        )

    def change_images(self, images: Iterable[str], now: datetime) -> bool:
        wanted = _name_set(images)
        if wanted == self.images:
            return False
        return self._trigger(self.ImagesChanged, now, images=wanted)

    # ---- image pulls ---------------------------------------------------------------------

    def pull_started(self, reference: str, kernels: dict[str, str], now: datetime) -> bool:
        """A pull began (again, after a restart: its layers on disk are not fetched twice)."""
        return self._trigger(self.PullStarted, now, reference=reference, kernels=dict(kernels))

    def pull_progressed(
        self, reference: str, done: int, total: int, layers: Iterable[PulledLayer], now: datetime
    ) -> bool:
        kernels = self.pulling.get(reference)
        if kernels is None:
            return False  # not started (or over): a late report
        return self._trigger(
            self.PullProgressed, now, reference=reference, done_bytes=done, total_bytes=total,
            layers=tuple(layers), kernels=kernels,
        )  # fmt: skip

    def pull_finished(self, reference: str, digest: str, now: datetime) -> bool:
        kernels = self.pulling.get(reference)
        if kernels is None:
            return False
        return self._trigger(
            self.PullFinished, now, reference=reference, digest=digest, kernels=kernels
        )

    def pull_failed(self, reference: str, cause: PullCause, reason: str, now: datetime) -> bool:
        kernels = self.pulling.get(reference, {})
        return self._trigger(
            self.PullFailed, now, reference=reference, cause=cause, reason=reason, kernels=kernels
        )

    def image_purged(
        self, reference: str, request_seq: int, freed: int, refused: str, now: datetime
    ) -> bool:
        if request_seq <= self.purged_seq:
            return False  # answered already (a pass repeated after an unknown outcome)
        return self._trigger(
            self.Purged, now, reference=reference, request_seq=request_seq, freed_bytes=freed,
            refused=refused,
        )  # fmt: skip

    def kernel_started(
        self, kernel_id: str, session_id: str, container_id: str, now: datetime
    ) -> bool:
        """Report a running kernel; reporting it again (after a restart) changes nothing."""
        known = self.running.get(kernel_id)
        same = (session_id, container_id)
        if known is not None and (known.session_id, known.container_id) == same:
            return False
        if known is not None:
            raise KernelConflictError(
                f"agent {self.id}: kernel {kernel_id} already runs in container "
                f"{known.container_id} for session {known.session_id}"
            )
        return self._trigger(
            self.Started, now, kernel_id=kernel_id, session_id=session_id, container_id=container_id
        )

    def report_service_ports(
        self, kernel_id: str, ports: Iterable[ReportedPort], now: datetime
    ) -> bool:
        """Report what became of a running kernel's apps, once: a kernel not running (it ended
        while its ports were awaited) or already reported changes nothing."""
        known = self.running.get(kernel_id)
        if known is None or known.ports_reported:
            return False
        return self._trigger(
            self.ServicePortsReported, now, kernel_id=kernel_id, session_id=known.session_id,
            ports=tuple(ports),
        )  # fmt: skip

    def kernel_failed_to_start(
        self, kernel_id: str, session_id: str, reason: str, now: datetime
    ) -> bool:
        if kernel_id in self.running:
            raise KernelConflictError(f"agent {self.id}: kernel {kernel_id} is already running")
        return self._trigger(
            self.FailedToStart, now, kernel_id=kernel_id, session_id=session_id, reason=reason
        )

    def kernel_exited(self, kernel_id: str, exit_code: int, reason: str, now: datetime) -> bool:
        """Report an exit. An exit of a kernel not running (unknown, or already reported)
        changes nothing, so a level-triggered agent may report what it sees every pass."""
        known = self.running.get(kernel_id)
        if known is None:
            return False
        return self._trigger(
            self.Exited,
            now,
            kernel_id=kernel_id,
            session_id=known.session_id,
            exit_code=exit_code,
            reason=reason,
        )

    # ---- events --------------------------------------------------------------------------

    # One wire name for every registration: the first creates the aggregate, later ones
    # (a restarted agent) change it. Loading picks the class by whether the agent exists.
    class Registered(AgentRegistered, Aggregate.Created):
        def apply(self, agent: Agent) -> None:
            _registered(agent, self)

    class Reregistered(AgentRegistered, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            _registered(agent, self)

    class ImagesChanged(AgentImagesChanged, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            agent.images = self.images

    class PullStarted(ImagePullStarted, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            # A kernel joining a pull under way is named by a start of its own.
            agent.pulling[self.reference] = {
                **agent.pulling.get(self.reference, {}),
                **self.kernels,
            }

    class PullProgressed(ImagePullProgressed, Aggregate.Event):
        pass  # how far it is: for the people waiting, not the agent's state

    class PullFinished(ImagePullFinished, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            agent.pulling.pop(self.reference, None)

    class PullFailed(ImagePullFailed, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            agent.pulling.pop(self.reference, None)

    class Purged(ImagePurged, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            agent.purged_seq = max(agent.purged_seq, self.request_seq)

    class Started(KernelStarted, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            agent.running[self.kernel_id] = RunningKernel(
                session_id=self.session_id, container_id=self.container_id
            )

    class ServicePortsReported(KernelServicePortsReported, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            known = agent.running.get(self.kernel_id)
            if known is not None:
                agent.running[self.kernel_id] = known.model_copy(update={"ports_reported": True})

    class FailedToStart(KernelFailedToStart, Aggregate.Event):
        pass  # a fact for the scheduler; the agent's own state does not change

    class Exited(KernelExited, Aggregate.Event):
        def apply(self, agent: Agent) -> None:
            agent.running.pop(self.kernel_id, None)


def _registered(agent: Agent, event: AgentRegistered) -> None:
    agent.epoch = event.epoch
    agent.hostname = event.hostname
    agent.backend = event.backend
    agent.capacity = event.capacity
    agent.devices = event.devices
    agent.numa = event.numa
    agent.images = event.images
    agent.volumes = event.volumes


def _name_set(names: Iterable[str]) -> tuple[str, ...]:
    # Sorted and unique (images, volumes), so that "changed" means the set changed, not the
    # listing order.
    return tuple(sorted(set(names)))
