"""What the SDK returns for compute sessions and their apps (``jetyard.sdk.sessions``)."""

from __future__ import annotations

from datetime import datetime

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
    created_at: datetime
    updated_at: datetime
    seq: int


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
