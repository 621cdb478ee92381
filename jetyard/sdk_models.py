"""What the SDK returns: the gateway's GraphQL types as frozen pydantic models (snake_case
attributes, camelCase on the wire), and ``selection``, which writes the GraphQL selection set
of a model so that a query asks for exactly the fields its model reads."""

from __future__ import annotations

import types
import typing
from datetime import datetime
from typing import Any, Union

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    def as_json(self) -> dict[str, Any]:
        """As the gateway writes it (camelCase), JSON-ready: what ``--json`` prints."""
        return self.model_dump(mode="json", by_alias=True)


def camel_name(name: str) -> str:
    """``total_resource_slots`` -> ``totalResourceSlots``: the API's spelling of a name."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _inner_model(annotation: Any) -> type[Model] | None:
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None


def selection(model: type[Model]) -> str:
    """``id status resources { cpu memoryBytes gpu } ...``: every field, nested ones too."""
    parts = []
    for name, field in model.model_fields.items():
        alias = field.alias or name
        inner = _inner_model(field.annotation)
        parts.append(f"{alias} {{ {selection(inner)} }}" if inner is not None else alias)
    return " ".join(parts)


# ---- sessions ----------------------------------------------------------------------------


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


# ---- accounts, administration, usage ------------------------------------------------------


class LoginResult(Model):
    token: str
    user_id: str
    expires_in_s: int


class Viewer(Model):
    user_id: str
    role: str
    domain: str
    projects: list[str]
    access_key: str | None = None


class AdminOutcome(Model):
    command_id: str
    status: str
    message: str
    id: str | None = None


class Limits(Model):
    cpu: str | None = None
    memory_bytes: str | None = None
    gpu: str | None = None


class DomainInfo(Model):
    name: str
    description: str
    total_resource_slots: Limits
    active: bool


class ProjectInfo(Model):
    id: str
    domain: str
    name: str
    description: str
    total_resource_slots: Limits
    policy: str
    active: bool


class UserInfo(Model):
    id: str
    domain: str
    role: str
    email: str | None = None
    policy: str
    projects: list[str]
    default_access_key: str | None = None
    active: bool


class KeypairInfo(Model):
    access_key: str
    user_id: str
    domain: str
    policy: str
    rate_limit: int | None = None
    is_default: bool
    active: bool


class IssuedKeypair(Model):
    """A new keypair: its secret key is shown here once and never again."""

    outcome: AdminOutcome
    access_key: str
    secret_key: str


class KeypairLimits(Model):
    total_resource_slots: Limits
    default_for_unspecified: str
    max_concurrent_sessions: int | None = None
    max_pending_sessions: int | None = None
    max_pending_resource_slots: Limits
    max_containers_per_session: int
    max_session_lifetime_s: int | None = None
    idle_timeout_s: int | None = None
    idle_utilization_threshold_pct: int | None = None
    max_priority: int


class StorageLimits(Model):
    max_vfolder_count: int | None = None
    max_quota_scope_size_bytes: str | None = None


class ResourcePolicyInfo(Model):
    id: str
    kind: str
    name: str
    keypair: KeypairLimits | None = None
    storage: StorageLimits | None = None


class QuotaSlot(Model):
    slot: str
    used: str
    limit: str


class Quota(Model):
    scope: str
    scope_id: str
    name: str | None = None
    slots: list[QuotaSlot]
    sessions: int
    max_sessions: int | None = None
    pending: int
    max_pending: int | None = None


class Node(Model):
    id: str
    hostname: str
    resource_group: str
    capacity: Resources
    used: Resources
    allocations: int
    state: str
    reason: str


class GpuDeviceUsage(Model):
    node: str
    device: str
    seconds: float
    share_seconds: float


class UsageRow(Model):
    """What one session, user, project, domain or resource group (``key``) used over a
    period; ``gpu_seconds`` in GPU-equivalents (a 0.5 share for 100 s is 50)."""

    key: str
    name: str | None = None
    cpu_core_seconds: float
    memory_gib_seconds: float
    gpu_seconds: float
    gpu_device_seconds: list[GpuDeviceUsage] = []
    sessions: int
