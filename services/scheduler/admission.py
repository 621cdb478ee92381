"""Quota admission: which waiting sessions of one domain may have their slots reserved now.
Pure; reads the quota aggregates and the tenancy directory handed in, writes nothing.

A session is admitted when, on every scope of its owner, what the scope holds plus what this
pass already admitted plus the session itself stays within the scope's limits. Order is
strict per scope: once a session does not fit on a scope, no later session is admitted on
that scope in the same pass, so freeing room admits the oldest (highest priority) first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from commands.quota import Quota
from schemas.resources import ZERO, ResourceSlots
from schemas.tenancy import (
    SLOT_NAMES,
    DefaultForUnspecified,
    KeypairPolicyLimits,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    quota_id_for,
)
from services.scheduler.reasons import format_memory

Scope = tuple[ScopeKind, str]
_FIELDS = dict(zip(SLOT_NAMES, ("cpu_milli", "memory_bytes", "gpu_hundredths"), strict=True))


class Limits(Protocol):
    """What admission asks the tenancy directory (``commands.directory.Directory``)."""

    def keypair_limits(self, access_key: str) -> KeypairPolicyLimits | None: ...

    def scope_limits(
        self, kind: ScopeKind, scope_id: str
    ) -> tuple[SlotLimits, DefaultForUnspecified]: ...

    def scope_name(self, kind: ScopeKind, scope_id: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """A waiting session not yet admitted, as admission sees it."""

    session_id: str
    owner: SessionOwner
    slots: ResourceSlots
    priority: int = 10


@dataclass(frozen=True, slots=True)
class Admit:
    session_id: str


@dataclass(frozen=True, slots=True)
class Wait:
    session_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Cancel:
    """Its request alone exceeds a hard limit: waiting cannot help."""

    session_id: str
    reason: str


Decision = Admit | Wait | Cancel


@dataclass(frozen=True, slots=True)
class ScopeLimits:
    slots: SlotLimits
    unspecified: DefaultForUnspecified
    sessions: int | None = None
    """Concurrent sessions (keypair scope only); None: no limit."""


def limits_of(scope: Scope, directory: Limits) -> ScopeLimits | None:
    """A scope's limits; None when its keypair (or the keypair's policy) is unknown."""
    kind, scope_id = scope
    if kind is ScopeKind.KEYPAIR:
        policy = directory.keypair_limits(scope_id)
        if policy is None:
            return None
        return ScopeLimits(
            policy.total_resource_slots,
            policy.default_for_unspecified,
            policy.max_concurrent_sessions,
        )
    if kind is ScopeKind.USER:
        return ScopeLimits(SlotLimits(), DefaultForUnspecified.UNLIMITED)
    slots, unspecified = directory.scope_limits(kind, scope_id)
    return ScopeLimits(slots, unspecified)


def hard_limit_exceeded(owner: SessionOwner, need: ResourceSlots, directory: Limits) -> str | None:
    """Why ``need`` can never be admitted for ``owner`` (more than a limit with nothing
    used), or None."""
    for scope in owner.scopes():
        limits = limits_of(scope, directory)
        if limits is None:
            continue
        for slot, amount, limit in limits.slots.over(need, limits.unspecified):
            name = _scope_name(scope, directory)
            return (
                f"asks for {amount_text(slot, amount)} {slot} but {name} allows at most "
                f"{amount_text(slot, limit)}"
            )
    return None


def admit(
    candidates: Sequence[Candidate], quotas: Mapping[str, Quota], directory: Limits
) -> list[Decision]:
    """Decide every candidate, highest priority first, then in the order given (request
    order). ``quotas`` maps quota ids to the scopes' aggregates (a missing one holds
    nothing)."""
    ordered = sorted(candidates, key=lambda c: -c.priority)  # stable: request order kept
    added: dict[Scope, tuple[ResourceSlots, int]] = {}
    blocked: dict[Scope, str] = {}
    decisions: list[Decision] = []
    for candidate in ordered:
        decision = _decide(candidate, quotas, directory, added, blocked)
        decisions.append(decision)
        if isinstance(decision, Admit):
            for scope in candidate.owner.scopes():
                slots, count = added.get(scope, (ZERO, 0))
                added[scope] = (slots + candidate.slots, count + 1)
    return decisions


def _decide(
    candidate: Candidate,
    quotas: Mapping[str, Quota],
    directory: Limits,
    added: dict[Scope, tuple[ResourceSlots, int]],
    blocked: dict[Scope, str],
) -> Decision:
    sid, owner, need = candidate.session_id, candidate.owner, candidate.slots
    hard = hard_limit_exceeded(owner, need, directory)
    if hard is not None:
        return Cancel(sid, hard)
    reasons: list[str] = []
    for scope in owner.scopes():
        limits = limits_of(scope, directory)
        if limits is None:
            return Wait(sid, f"keypair {scope[1]} has no known resource policy")
        if scope in blocked:
            reasons.append(blocked[scope])
            continue
        short = _shortage(scope, need, limits, quotas, added.get(scope, (ZERO, 0)), directory)
        if short is not None:
            # Strict order: what waits here holds back every later session on this scope.
            blocked[scope] = short
            reasons.append(short)
    if reasons:
        return Wait(sid, "; ".join(dict.fromkeys(reasons)))
    return Admit(sid)


def _shortage(
    scope: Scope,
    need: ResourceSlots,
    limits: ScopeLimits,
    quotas: Mapping[str, Quota],
    added: tuple[ResourceSlots, int],
    directory: Limits,
) -> str | None:
    quota = quotas.get(quota_id_for(*scope))
    held_slots = quota.used if quota is not None else ZERO
    held_count = len(quota.reserved) if quota is not None else 0
    used, count = held_slots + added[0], held_count + added[1]
    name = _scope_name(scope, directory)
    if limits.sessions is not None and count + 1 > limits.sessions:
        return f"{name}: {count}/{limits.sessions} concurrent sessions"
    over = limits.slots.over(used + need, limits.unspecified)
    if not over:
        return None
    slot, _, limit = over[0]
    amount = _field(used, slot)
    text = f"{name}: {slot} {amount_text(slot, amount)}/{amount_text(slot, limit)} in use"
    if amount < limit:
        text += f", asks for {amount_text(slot, _field(need, slot))}"
    return text


def _scope_name(scope: Scope, directory: Limits) -> str:
    kind, scope_id = scope
    if kind is ScopeKind.KEYPAIR:
        return f"keypair {scope_id}"
    return f"{kind.value} {directory.scope_name(kind, scope_id)}"


def _field(slots: ResourceSlots, slot: str) -> int:
    value: int = getattr(slots, _FIELDS[slot])
    return value


def amount_text(slot: str, value: int) -> str:
    if slot == "memory":
        return format_memory(value)
    quantum = 1000 if slot == "cpu" else 100
    return f"{(Decimal(value) / quantum).normalize():f}"


def scopes_of(candidates: Iterable[Candidate]) -> set[Scope]:
    return {scope for c in candidates for scope in c.owner.scopes()}
