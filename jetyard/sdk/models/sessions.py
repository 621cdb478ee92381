"""What the SDK returns for compute sessions and their apps (``jetyard.sdk.sessions``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import computed_field

from jetyard.sdk.wire import Model


class Resources(Model):
    cpu: str
    memory_bytes: str
    gpu: str


class StatusChange(Model):
    status: str
    reason: str
    at: datetime
    seq: int
    queue_position: int | None = None
    queue_length: int | None = None


class SessionMount(Model):
    folder_id: str
    name: str
    path: str
    read_only: bool


class ServicePort(Model):
    """An app one kernel serves: ``state`` open, never-opened or not-probed."""

    kernel_id: str
    name: str
    protocol: str
    port: int
    state: str
    public: bool


class FairShareFactors(Model):
    """A waiting session's owner's fair-share factors (0 to 1; higher goes first, the domain's
    before the project's before the user's), as its reason says them."""

    domain: float
    project: float
    user: float


class SessionSummary(Model):
    """A session as listings show it."""

    id: str
    name: str | None = None
    status: str
    status_reason: str
    type: str
    image: str
    resources: Resources
    command: list[str] | None = None
    kernel_ids: list[str]
    exit_code: int | None = None
    result: str | None = None
    cluster_size: int
    fair_share: FairShareFactors | None = None
    """While PENDING in a fair-share group."""
    created_at: datetime
    updated_at: datetime
    seq: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ended_as(self) -> str | None:
        """How it ended, in a word or three: ``succeeded``, ``failed (exit 2)``, ``failed``
        (could not run), ``terminated`` (its end was asked for, whatever the exit code that
        stop gave), ``stopped`` (ended before it ran), ``cancelled``; None until it ends."""
        if self.status == "CANCELLED":
            return "cancelled"
        if self.status == "ERROR":
            return "failed"
        if self.status != "TERMINATED":
            return None
        if self.result == "terminated":  # asked to end: the exit code is the stop's
            return "terminated"
        if self.exit_code is None:
            return "stopped"
        return "succeeded" if self.exit_code == 0 else f"failed (exit {self.exit_code})"


class Session(SessionSummary):
    """One session in full: its nodes, mounts, apps and status history."""

    node_ids: list[str]
    depends_on: list[str]
    cluster_mode: str
    mounts: list[SessionMount]
    service_ports: list[ServicePort]
    history: list[StatusChange]
    queue_position: int | None = None
    queue_length: int | None = None


class Outcome(Model):
    """What a session command came to: ACCEPTED, REJECTED (``code``, ``message``) or PENDING
    (not decided within the gateway's wait; ``commandOutcome`` answers later)."""

    command_id: str
    status: str
    code: str | None = None
    message: str
    session_id: str | None = None
    seq: int | None = None


class KernelOutput(Model):
    """Lines one kernel printed; ``position`` is the number of the first."""

    kernel_id: str
    position: int
    lines: list[str]
    dropped: int
    notice: str | None = None


class AppAccess(Model):
    url: str
    expires_at: datetime


class Mount(Model):
    """A folder to mount into a session: by name or id, at ``path`` (default
    ``/home/work/<name>``)."""

    folder: str
    path: str | None = None
    read_only: bool = False


class RunnableImage(Model):
    """An image a session may name: ``registered`` (by an administrator, with its apps; from
    ``registry`` at ``digest`` when a rescan found it there) and where the nodes report holding
    it (``nodes``, in ``resource_groups``; 0 and none when no node the caller may use holds it
    yet)."""

    name: str
    registered: bool
    nodes: int
    resource_groups: list[str]
    apps: list[str]
    registry: str | None = None
    digest: str = ""
    hosts: list[str] = []
    """The host names of the nodes that hold it."""
