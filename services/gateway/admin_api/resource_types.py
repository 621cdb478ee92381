"""GraphQL object types of the admin surface's resources: limits and slots, resource policies,
resource groups, images, and quota use per scope. Amounts are decimal strings (cores, bytes,
devices)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import strawberry

from commands.tenancy import Image, ResourceGroup, ResourcePolicy
from schemas.resources import CPU_QUANTUM, GPU_QUANTUM, ResourceSlots
from schemas.service_ports import ServicePort
from schemas.tenancy import (
    SLOT_NAMES,
    DefaultForUnspecified,
    GroupScheduling,
    KeypairPolicyLimits,
    SlotLimits,
    StoragePolicyLimits,
)
from services.gateway.admin_api.group_settings import with_setting_fields

UNLIMITED = "unlimited"


def _cpu(milli: int) -> str:
    return str(Decimal(milli) / CPU_QUANTUM)


def _gpu(hundredths: int) -> str:
    return str(Decimal(hundredths) / GPU_QUANTUM)


_SHOW: dict[str, Callable[[int], str]] = {"cpu": _cpu, "memory": str, "gpu": _gpu}
_FIELD = {"cpu": "cpu_milli", "memory": "memory_bytes", "gpu": "gpu_hundredths"}


@strawberry.type(description="A limit per slot; null: the slot is not named.")
class Limits:
    cpu: str | None = strawberry.field(description="cores, as a decimal string")
    memory_bytes: str | None
    gpu: str | None = strawberry.field(description="devices, as a decimal string")

    @classmethod
    def of(cls, limits: SlotLimits) -> Limits:
        return cls(
            cpu=None if limits.cpu_milli is None else _cpu(limits.cpu_milli),
            memory_bytes=None if limits.memory_bytes is None else str(limits.memory_bytes),
            gpu=None if limits.gpu_hundredths is None else _gpu(limits.gpu_hundredths),
        )


@strawberry.type
class Slots:
    cpu: str
    memory_bytes: str
    gpu: str

    @classmethod
    def of(cls, slots: ResourceSlots) -> Slots:
        return cls(
            cpu=_cpu(slots.cpu_milli),
            memory_bytes=str(slots.memory_bytes),
            gpu=_gpu(slots.gpu_hundredths),
        )


@strawberry.type
class KeypairLimits:
    total_resource_slots: Limits
    default_for_unspecified: str
    max_concurrent_sessions: int | None
    max_pending_sessions: int | None
    max_pending_resource_slots: Limits
    max_containers_per_session: int
    max_session_lifetime_s: int | None
    idle_timeout_s: int | None
    idle_utilization_threshold_pct: int | None
    max_priority: int

    @classmethod
    def of(cls, limits: KeypairPolicyLimits) -> KeypairLimits:
        return cls(
            total_resource_slots=Limits.of(limits.total_resource_slots),
            default_for_unspecified=limits.default_for_unspecified.value,
            max_concurrent_sessions=limits.max_concurrent_sessions,
            max_pending_sessions=limits.max_pending_sessions,
            max_pending_resource_slots=Limits.of(limits.max_pending_resource_slots),
            max_containers_per_session=limits.max_containers_per_session,
            max_session_lifetime_s=limits.max_session_lifetime_s,
            idle_timeout_s=limits.idle_timeout_s,
            idle_utilization_threshold_pct=limits.idle_utilization_threshold_pct,
            max_priority=limits.max_priority,
        )


@strawberry.type
class StorageLimits:
    max_vfolder_count: int | None
    max_quota_scope_size_bytes: str | None

    @classmethod
    def of(cls, limits: StoragePolicyLimits) -> StorageLimits:
        size = limits.max_quota_scope_size_bytes
        return cls(
            max_vfolder_count=limits.max_vfolder_count,
            max_quota_scope_size_bytes=None if size is None else str(size),
        )


@strawberry.type
class ResourcePolicyInfo:
    id: strawberry.ID
    kind: str
    name: str
    keypair: KeypairLimits | None
    storage: StorageLimits | None

    @classmethod
    def of(cls, policy: ResourcePolicy) -> ResourcePolicyInfo:
        return cls(
            id=strawberry.ID(str(policy.id)),
            kind=policy.kind.value,
            name=policy.name,
            keypair=None if policy.keypair is None else KeypairLimits.of(policy.keypair),
            storage=None if policy.storage is None else StorageLimits.of(policy.storage),
        )


@strawberry.type
@with_setting_fields
class ResourceGroupInfo:
    """A group's scheduling settings are fields of their own (``group_settings``)."""

    name: strawberry.ID
    description: str
    allowed_session_types: list[str]
    domains: list[str] | None = strawberry.field(description="null unless a superadmin asks")
    projects: list[str] | None
    keypairs: list[str] | None
    active: bool
    scheduling: strawberry.Private[GroupScheduling]

    @classmethod
    def of(cls, group: ResourceGroup, *, members: bool) -> ResourceGroupInfo:
        # Who else may use a group is another tenant's business: only superadmins see it.
        return cls(
            name=strawberry.ID(group.name),
            description=group.description,
            allowed_session_types=[t.value for t in group.allowed_session_types],
            domains=sorted(group.domains) if members else None,
            projects=sorted(group.projects) if members else None,
            keypairs=sorted(group.keypairs) if members else None,
            active=group.active,
            scheduling=group.scheduling,
        )


@strawberry.type
class ImageInfo:
    id: strawberry.ID
    name: str
    min_resources: Slots
    max_resources: Limits
    service_ports: list[ImageServicePort] = strawberry.field(
        description="the apps its containers serve (from its labels when registered)"
    )
    registry: str | None = strawberry.field(
        default=None, description="the registry a rescan found it in (null: registered by hand)"
    )
    digest: str = strawberry.field(default="", description="its manifest digest there")
    architecture: str = ""
    size_bytes: float = strawberry.field(default=0, description="its layers, as listed there")
    pull_policy: str | None = strawberry.field(
        default=None, description="if-not-present | always | digest; null: its group's"
    )

    @classmethod
    def of(cls, image: Image, registry: str | None = None) -> ImageInfo:
        return cls(
            id=strawberry.ID(str(image.id)),
            name=image.name,
            min_resources=Slots.of(image.min_resources),
            max_resources=Limits.of(image.max_resources),
            service_ports=[ImageServicePort.of(p) for p in image.service_ports],
            registry=registry,
            digest=image.digest,
            architecture=image.architecture,
            size_bytes=image.size_bytes,
            pull_policy=image.pull_policy.value if image.pull_policy is not None else None,
        )


@strawberry.type
class ImageServicePort:
    name: str
    protocol: str = strawberry.field(description="http | tcp | pty | preopen")
    ports: list[int] = strawberry.field(description="container ports; the first is served")
    public: bool = strawberry.field(description="opened without the owner's authentication")

    @classmethod
    def of(cls, port: ServicePort) -> ImageServicePort:
        return cls(
            name=port.name, protocol=port.protocol.value, ports=list(port.ports),
            public=port.public,
        )  # fmt: skip


@strawberry.type
class QuotaSlot:
    slot: str = strawberry.field(description="cpu (cores) | memory (bytes) | gpu (devices)")
    used: str = strawberry.field(
        description="reserved by admission (what the limit counts): held, plus what admitted "
        "sessions not placed yet ask for"
    )
    held: str = strawberry.field(description="held by the scope's sessions placed on nodes")
    waiting: str = strawberry.field(
        description="asked for by the scope's sessions not placed yet (admitted or queued); "
        "never counted as held"
    )
    limit: str = strawberry.field(description='a decimal string, or "unlimited"')


@strawberry.type(description="What one scope may hold and holds now.")
class Quota:
    scope: str = strawberry.field(description="keypair | user | project | domain")
    scope_id: strawberry.ID
    name: str | None
    slots: list[QuotaSlot]
    sessions: int = strawberry.field(description="sessions holding a reservation")
    max_sessions: int | None = strawberry.field(description="null: no limit")
    pending: int = strawberry.field(description="sessions waiting for admission")
    max_pending: int | None = strawberry.field(description="null: no limit")
    holding: int = strawberry.field(description="sessions placed on nodes (what held counts)")
    waiting: int = strawberry.field(
        description="sessions not placed yet, admitted or queued (what waiting counts)"
    )


def quota_slots(
    limits: SlotLimits,
    unspecified: DefaultForUnspecified,
    used: ResourceSlots,
    held: ResourceSlots,
    waiting: ResourceSlots,
) -> list[QuotaSlot]:
    found = []
    for slot in SLOT_NAMES:
        limit = limits.limit(slot, unspecified)
        show, field = _SHOW[slot], _FIELD[slot]
        found.append(
            QuotaSlot(
                slot=slot,
                used=show(getattr(used, field)),
                held=show(getattr(held, field)),
                waiting=show(getattr(waiting, field)),
                limit=UNLIMITED if limit is None else show(limit),
            )
        )
    return found
