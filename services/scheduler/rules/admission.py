"""Quota admission rule, pure (reads and writes no subjects): which sessions may reserve now.

Decides which waiting sessions of one domain may have their slots reserved now, on the quota
aggregates and the tenancy directory handed in (``steps.admit`` writes the decisions).

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
from placement.reasons import format_memory
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
    order: int = 0
    """The stream sequence of its request. A replica folds its own requests from their acks,
    ahead of other replicas' earlier ones still on their way: the order it folded them in is
    not request order."""


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
    """Decide every candidate, highest priority first, then in request order (then in the
    order given). ``quotas`` maps quota ids to the scopes' aggregates (a missing one holds
    nothing)."""
    ordered = sorted(candidates, key=lambda c: (-c.priority, c.order))
    rules = _Rules(directory, quotas)
    decisions: list[Decision] = []
    for candidate in ordered:
        decision = rules.decide(candidate)
        decisions.append(decision)
        if isinstance(decision, Admit):
            for scope in candidate.owner.scopes():
                rules.add(scope, candidate.slots)
    return decisions


class _Rules:
    """One pass's admission over one domain: what each scope holds and allows, looked up once
    per scope (a pass may decide thousands of sessions of a few scopes), with the pass's own
    admissions added as plain integers."""

    def __init__(self, directory: Limits, quotas: Mapping[str, Quota]) -> None:
        self._directory = directory
        self._quotas = quotas
        self._limits: dict[Scope, ScopeLimits | None] = {}
        self._hard: dict[tuple[SessionOwner, ResourceSlots], str | None] = {}
        self._held: dict[Scope, list[int]] = {}
        """Scope -> [cpu, memory, gpu, sessions] held, this pass's admissions included."""
        self._blocked: dict[Scope, str] = {}

    def limits(self, scope: Scope) -> ScopeLimits | None:
        if scope not in self._limits:
            self._limits[scope] = limits_of(scope, self._directory)
        return self._limits[scope]

    def held(self, scope: Scope) -> list[int]:
        found = self._held.get(scope)
        if found is None:
            quota = self._quotas.get(quota_id_for(*scope))
            used = quota.used if quota is not None else ZERO
            count = len(quota.reserved) if quota is not None else 0
            found = [used.cpu_milli, used.memory_bytes, used.gpu_hundredths, count]
            self._held[scope] = found
        return found

    def add(self, scope: Scope, slots: ResourceSlots) -> None:
        held = self.held(scope)
        held[0] += slots.cpu_milli
        held[1] += slots.memory_bytes
        held[2] += slots.gpu_hundredths
        held[3] += 1

    def decide(self, candidate: Candidate) -> Decision:
        sid, owner, need = candidate.session_id, candidate.owner, candidate.slots
        key = (owner, need)
        if key not in self._hard:
            self._hard[key] = hard_limit_exceeded(owner, need, self._directory)
        hard = self._hard[key]
        if hard is not None:
            return Cancel(sid, hard)
        reasons: list[str] = []
        for scope in owner.scopes():
            limits = self.limits(scope)
            if limits is None:
                return Wait(sid, f"keypair {scope[1]} has no known resource policy")
            if scope in self._blocked:
                reasons.append(self._blocked[scope])
                continue
            short = self._shortage(scope, need, limits)
            if short is not None:
                # Strict order: what waits here holds back every later session on this scope.
                self._blocked[scope] = short
                reasons.append(short)
        if reasons:
            return Wait(sid, "; ".join(dict.fromkeys(reasons)))
        return Admit(sid)

    def _shortage(self, scope: Scope, need: ResourceSlots, limits: ScopeLimits) -> str | None:
        cpu, memory, gpu, count = self.held(scope)
        if limits.sessions is not None and count + 1 > limits.sessions:
            name = _scope_name(scope, self._directory)
            return f"{name}: {count}/{limits.sessions} concurrent sessions"
        # Validated: for three whole numbers pydantic's validation costs less than its
        # model_construct.
        after = ResourceSlots(
            cpu_milli=cpu + need.cpu_milli,
            memory_bytes=memory + need.memory_bytes,
            gpu_hundredths=gpu + need.gpu_hundredths,
        )
        over = limits.slots.over(after, limits.unspecified)
        if not over:
            return None
        slot, _, limit = over[0]
        used = ResourceSlots(cpu_milli=cpu, memory_bytes=memory, gpu_hundredths=gpu)
        amount = _field(used, slot)
        name = _scope_name(scope, self._directory)
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
