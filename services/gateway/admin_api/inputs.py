"""GraphQL input of the admin surface in human units (cores, "2g", devices), turned into the
limit models the admin commands carry; every mistake is named in one sentence. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import TypeVar

import strawberry

from schemas.bounds import (
    CEILING,
    CEILINGS,
    DEFAULT_LIMITS,
    BoundsError,
    control_character,
    memory_bytes,
)
from schemas.resources import CPU_QUANTUM, GPU_QUANTUM, ResourceSlots
from schemas.tenancy import (
    SESSION_PRIORITY_DEFAULT,
    SESSION_PRIORITY_MAX,
    DefaultForUnspecified,
    KeypairPolicyLimits,
    PolicyKind,
    SlotLimits,
    StoragePolicyLimits,
)
from services.gateway.core.inputs import InputError, parse_amount

E = TypeVar("E", bound=StrEnum)

_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s.]+(?:\.[^@\s.]+)+$")
MIN_PASSWORD = 8
MAX_PASSWORD = 1024


@strawberry.input(description="A limit per slot; null: the slot is not named by this limit.")
class SlotLimitsInput:
    cpu: str | None = strawberry.field(default=None, description="cores, e.g. 4 or 0.5")
    memory: str | None = strawberry.field(default=None, description="bytes or 512m, 2g")
    gpu: str | None = strawberry.field(default=None, description="devices, e.g. 1 or 0.25")


@strawberry.input(description="An amount of each slot (null: none).")
class SlotsInput:
    cpu: str | None = None
    memory: str | None = None
    gpu: str | None = None


@strawberry.input(description="A keypair resource policy; null: no limit.")
class KeypairPolicyInput:
    total_resource_slots: SlotLimitsInput | None = None
    default_for_unspecified: str = strawberry.field(
        default="unlimited", description="what a slot left out is limited to: limited | unlimited"
    )
    max_concurrent_sessions: int | None = None
    max_pending_sessions: int | None = None
    max_pending_resource_slots: SlotLimitsInput | None = None
    max_containers_per_session: int = 1
    max_session_lifetime_s: int | None = None
    idle_timeout_s: int | None = None
    idle_utilization_threshold_pct: int | None = None
    max_priority: int = SESSION_PRIORITY_DEFAULT


@strawberry.input(description="A user or project resource policy (virtual folders); null: none.")
class StoragePolicyInput:
    max_vfolder_count: int | None = None
    max_quota_scope_size: str | None = strawberry.field(default=None, description="e.g. 100g")


@strawberry.input(description="One label of an image, as `docker image inspect` shows it.")
class ImageLabelInput:
    key: str
    value: str


@strawberry.input(description="An app the image serves (see docs/tenancy.md, service ports).")
class ServicePortInput:
    name: str = strawberry.field(description="1-32 of a-z, 0-9 and '-'")
    protocol: str = strawberry.field(description="http | tcp | pty | preopen")
    ports: list[int] = strawberry.field(description="its container port(s); the first is served")
    public: bool = strawberry.field(default=False, description="no authentication needed")


def image_apps(
    labels: list[ImageLabelInput] | None, service_ports: list[ServicePortInput] | None
) -> dict[str, object]:
    """The image commands' ``labels`` and ``service_ports`` fields (left out when not given);
    the command parses and checks them."""
    fields: dict[str, object] = {}
    if labels is not None:
        fields["labels"] = {label.key: label.value for label in labels}
    if service_ports is not None:
        fields["service_ports"] = [
            {"name": p.name, "protocol": p.protocol, "ports": p.ports, "public": p.public}
            for p in service_ports
        ]
    return fields


# ---- quantities ---------------------------------------------------------------------------


def parse_size(field: str, text: str) -> int:
    """``"512m"``, ``"2GiB"``, ``"0"`` → bytes (a limit may be zero: "no memory at all")."""
    try:
        return memory_bytes(text, CEILINGS, least=0)
    except BoundsError as exc:
        raise InputError(str(exc).replace("memory", field, 1)) from None


def parse_quanta(field: str, text: str, quantum: int, unit: str) -> int:
    """A decimal amount (cores, devices) → integer quanta, refusing finer than one quantum."""
    amount = parse_amount(field, text) * quantum
    if amount != amount.to_integral_value():
        raise InputError(f"{field} {text!r} is finer than 1/{quantum} of a {unit}")
    if amount >= CEILING:
        raise InputError(f"{field} {text!r} is more than Jetyard can count")
    return int(amount)


def slot_limits(field: str, given: SlotLimitsInput | None) -> SlotLimits:
    if given is None:
        return SlotLimits()
    return SlotLimits(
        cpu_milli=_maybe(given.cpu, lambda t: parse_quanta(f"{field}.cpu", t, CPU_QUANTUM, "core")),
        memory_bytes=_maybe(given.memory, lambda t: parse_size(f"{field}.memory", t)),
        gpu_hundredths=_maybe(
            given.gpu, lambda t: parse_quanta(f"{field}.gpu", t, GPU_QUANTUM, "device")
        ),
    )


def slots(field: str, given: SlotsInput | None) -> ResourceSlots:
    if given is None:
        return ResourceSlots()
    return ResourceSlots(
        cpu_milli=parse_quanta(f"{field}.cpu", given.cpu or "0", CPU_QUANTUM, "core"),
        memory_bytes=parse_size(f"{field}.memory", given.memory or "0"),
        gpu_hundredths=parse_quanta(f"{field}.gpu", given.gpu or "0", GPU_QUANTUM, "device"),
    )


def _maybe(text: str | None, parse: Callable[[str], int]) -> int | None:
    return None if text is None else parse(text)


def count(
    field: str, value: int | None, *, least: int = 0, most: int = DEFAULT_LIMITS.max_count
) -> None:
    """Refuse an integer limit out of range, naming the field (every count has a maximum)."""
    if value is None:
        return
    if value < least:
        what = "negative" if least == 0 else f"less than {least}"
        raise InputError(f"{field} must not be {what}, got {value}")
    if value > most:
        raise InputError(f"{field} must be at most {most}, got {value}")


# ---- policies -----------------------------------------------------------------------------


def keypair_limits(given: KeypairPolicyInput) -> KeypairPolicyLimits:
    count("keypair.maxConcurrentSessions", given.max_concurrent_sessions)
    count("keypair.maxPendingSessions", given.max_pending_sessions)
    count("keypair.maxContainersPerSession", given.max_containers_per_session, least=1)
    seconds = DEFAULT_LIMITS.max_seconds
    count("keypair.maxSessionLifetimeS", given.max_session_lifetime_s, least=1, most=seconds)
    count("keypair.idleTimeoutS", given.idle_timeout_s, least=1, most=seconds)
    count(
        "keypair.idleUtilizationThresholdPct",
        given.idle_utilization_threshold_pct,
        least=1,
        most=100,
    )
    count("keypair.maxPriority", given.max_priority, most=SESSION_PRIORITY_MAX)
    return KeypairPolicyLimits(
        total_resource_slots=slot_limits("keypair.totalResourceSlots", given.total_resource_slots),
        default_for_unspecified=choice(
            "keypair.defaultForUnspecified", given.default_for_unspecified, DefaultForUnspecified
        ),
        max_concurrent_sessions=given.max_concurrent_sessions,
        max_pending_sessions=given.max_pending_sessions,
        max_pending_resource_slots=slot_limits(
            "keypair.maxPendingResourceSlots", given.max_pending_resource_slots
        ),
        max_containers_per_session=given.max_containers_per_session,
        max_session_lifetime_s=given.max_session_lifetime_s,
        idle_timeout_s=given.idle_timeout_s,
        idle_utilization_threshold_pct=given.idle_utilization_threshold_pct,
        max_priority=given.max_priority,
    )


def storage_limits(given: StoragePolicyInput) -> StoragePolicyLimits:
    count("storage.maxVfolderCount", given.max_vfolder_count)
    size = given.max_quota_scope_size
    return StoragePolicyLimits(
        max_vfolder_count=given.max_vfolder_count,
        max_quota_scope_size_bytes=None
        if size is None
        else parse_size("storage.maxQuotaScopeSize", size),
    )


def policy_limits(
    kind: PolicyKind, keypair: KeypairPolicyInput | None, storage: StoragePolicyInput | None
) -> tuple[KeypairPolicyLimits | None, StoragePolicyLimits | None]:
    """A keypair policy takes ``keypair`` limits, a user or project policy ``storage`` ones."""
    if kind is PolicyKind.KEYPAIR:
        if storage is not None:
            raise InputError("storage limits belong to user and project policies, not keypair")
        return keypair_limits(keypair or KeypairPolicyInput()), None
    if keypair is not None:
        raise InputError(f"keypair limits belong to keypair policies, not {kind.value}")
    return None, storage_limits(storage or StoragePolicyInput())


# ---- words --------------------------------------------------------------------------------


def choice(field: str, text: str, kind: type[E]) -> E:
    """One of an enumeration's values, or a sentence listing them."""
    try:
        return kind(text.strip().lower())
    except ValueError:
        allowed = " | ".join(member.value for member in kind)
        raise InputError(f"{field} must be one of {allowed}, got {text!r}") from None


def email(text: str) -> str:
    value = text.strip()
    if len(value) > 254 or not _EMAIL.match(value) or control_character(value) is not None:
        raise InputError(f"email {text[:80]!r} is not an email address, e.g. ada@example.org")
    return value


def password(text: str) -> str:
    if "\x00" in text:
        raise InputError("password must not contain a NUL character")
    if not MIN_PASSWORD <= len(text) <= MAX_PASSWORD:
        raise InputError(
            f"password must have {MIN_PASSWORD} to {MAX_PASSWORD} characters, got {len(text)}"
        )
    return text


def rate_limit(value: int | None) -> int | None:
    count("rateLimit", value, least=1)
    return value
