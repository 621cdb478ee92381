"""What the SDK returns for logins, administration and usage (``jetyard.sdk.admin``)."""

from __future__ import annotations

from jetyard.sdk.models.sessions import Resources
from jetyard.sdk.wire import Model


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
    fair_share: int = 1
    """Its share among its siblings for fair share."""


class ProjectInfo(Model):
    id: str
    domain: str
    name: str
    description: str
    total_resource_slots: Limits
    policy: str
    active: bool
    fair_share: int = 1


class UserInfo(Model):
    id: str
    domain: str
    role: str
    email: str | None = None
    policy: str
    projects: list[str]
    default_access_key: str | None = None
    active: bool
    fair_share: int = 1


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
    """One resource of a quota: three numbers never mixed (``held`` by placed sessions,
    ``waiting`` for sessions not placed yet, the ``limit``), and ``used``, what admission counts
    against the limit."""

    slot: str
    used: str
    held: str
    waiting: str
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
    holding: int
    """Sessions placed on nodes (what ``held`` counts)."""
    waiting: int
    """Sessions not placed yet, admitted or queued (what ``waiting`` counts)."""


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
