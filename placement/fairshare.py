"""Fair share with decay: how much each owner used a resource group lately, and the factor that
orders the group's queue by it (docs/scheduling.md, "Fair share"). Pure; reads and writes no
subject. The scheduler keeps a ``UsageBook`` folded from the node ledgers' allocations and
releases (at each event's own time, never the fold's clock) and asks ``tree`` in each pass; the
gateway lists the same tree from the usage view's intervals (``held_between``).

- Usage is resource-seconds weighted per slot (``FairShareSettings``: per GPU, CPU core and GiB
  of memory), decayed with the group's half-life h: what was held at time s counts
  2^(-(t-s)/h) at time t. One accumulator per owner holds the decayed total at its reference
  time t0 and the rate held since, so U(t) = U(t0)·2^(-(t-t0)/h) + r·(h/ln2)·(1-2^(-(t-t0)/h))
  costs O(1) at any t.
- Owners form a tree: domain → project → user. A level's usage is the sum of its owners'.
- Normalised usage U_norm = U / (the group's weighted capacity x h/ln2): the usage of the whole
  group held forever is 1. Normalised share S = the product, down the tree, of own share / the
  sum of the shares of the siblings that are active (hold usage, or have a session waiting).
- factor = 2^(-U_norm/S), in (0, 1]: 1 for no usage, ½ when an owner used exactly its share of
  the whole group held forever. With no usage for one half-life U_norm, so the exponent, halves
  (the factor becomes its square root).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from schemas.fair_share import HALF_LIFE_DEFAULT_S, FairShareSettings, FairShareStanding
from schemas.resources import CPU_QUANTUM, GPU_QUANTUM, ResourceSlots

LN2 = math.log(2)
GIB = float(1 << 30)
ACTIVE = 1e-6
"""An owner whose normalised usage fell below this (and waits for nothing) is no longer a
sibling that shares divide among: a year-old job does not dilute today's shares forever."""

Account = tuple[str, str, str]
"""(domain, project id, user id): a session's owner, as fair share counts it."""
Amounts = tuple[float, float, float]
"""(CPU cores, GiB of memory, GPUs): held now, or their decayed seconds."""
ShareOf = Callable[[Literal["domain", "project", "user"], str], int]
"""The share a domain (by name), project or user (by id) is given."""


def _units(quanta: list[int]) -> Amounts:
    return (quanta[0] / CPU_QUANTUM, quanta[1] / GIB, quanta[2] / GPU_QUANTUM)


def amounts(slots: ResourceSlots) -> Amounts:
    return _units([slots.cpu_milli, slots.memory_bytes, slots.gpu_hundredths])


def weigh(held: Amounts, settings: FairShareSettings) -> float:
    cpu, memory, gpu = held
    return (
        cpu * settings.cpu_usage_weight
        + memory * settings.memory_usage_weight
        + gpu * settings.gpu_usage_weight
    )


def norm_of(capacity: ResourceSlots, settings: FairShareSettings) -> float:
    """The decayed usage of the whole group held forever: U_norm's denominator."""
    return weigh(amounts(capacity), settings) * settings.usage_half_life_s / LN2


def decayed(value: float, rate: float, elapsed: float, half_life: float) -> float:
    """``value`` (at some time) ``elapsed`` seconds later, ``rate`` held all along."""
    if elapsed <= 0:
        return value
    kept = math.exp2(-elapsed / half_life)
    return value * kept + rate * (half_life / LN2) * (1.0 - kept)


def held_between(rate: float, start: float, end: float, now: float, half_life: float) -> float:
    """What holding ``rate`` from ``start`` to ``end`` counts at ``now`` (closed form of the
    accumulator: the gateway sums a usage view's intervals with it)."""
    end = min(end, now)
    if end <= start:
        return 0.0
    return decayed(0.0, rate, end - start, half_life) * math.exp2(-(now - end) / half_life)


# ---- the book: usage folded from allocations and releases ---------------------------------


@dataclass(slots=True)
class Accumulator:
    at: float
    """The reference time (epoch seconds) of ``used``."""
    used: list[float]
    """Decayed core-, GiB- and GPU-seconds at ``at``."""
    held: list[int] = field(default_factory=lambda: [0, 0, 0])
    """What is held since ``at``, in quanta (milli-CPU, bytes, GPU hundredths): integers, so
    releasing everything leaves exactly nothing held."""

    def advance(self, at: float, half_life: float) -> None:
        # The log's order is the truth: an event stamped before the reference time (another
        # writer's clock) counts at the reference time, so every fold of the log agrees.
        if at <= self.at:
            return
        self.used = list(self.value(at, half_life))
        self.at = at

    def value(self, now: float, half_life: float) -> Amounts:
        elapsed = now - self.at
        rate = _units(self.held)
        cpu, memory, gpu = (
            decayed(u, r, elapsed, half_life) for u, r in zip(self.used, rate, strict=True)
        )
        return (cpu, memory, gpu)


class UsageBook:
    """Decayed usage per resource group and owner, from allocations and releases at their own
    times. O(1) per event; ``usage`` is O(owners of the group)."""

    __slots__ = ("_groups", "_half_lives", "_held")

    def __init__(self) -> None:
        self._groups: dict[str, dict[Account, Accumulator]] = {}
        self._half_lives: dict[str, float] = {}
        self._held: dict[str, tuple[str, Account, ResourceSlots]] = {}
        """Kernel id -> (group, owner, slots) of what it holds."""

    def half_life(self, group: str) -> float:
        return self._half_lives.get(group, float(HALF_LIFE_DEFAULT_S))

    def allocate(
        self, kernel_id: str, group: str, account: Account, slots: ResourceSlots, at: float
    ) -> None:
        if kernel_id in self._held:
            self.release(kernel_id, at)  # never decided (allocations are a set), never drift
        self._held[kernel_id] = (group, account, slots)
        self._add(group, account, slots, at, 1)

    def release(self, kernel_id: str, at: float) -> None:
        gone = self._held.pop(kernel_id, None)
        if gone is not None:
            group, account, slots = gone
            self._add(group, account, slots, at, -1)

    def _add(
        self, group: str, account: Account, slots: ResourceSlots, at: float, sign: int
    ) -> None:
        owners = self._groups.setdefault(group, {})
        acc = owners.get(account)
        if acc is None:
            acc = owners[account] = Accumulator(at, [0.0, 0.0, 0.0])
        acc.advance(at, self.half_life(group))
        acc.held[0] += sign * slots.cpu_milli
        acc.held[1] += sign * slots.memory_bytes
        acc.held[2] += sign * slots.gpu_hundredths

    def set_half_life(self, group: str, half_life: float, at: float) -> None:
        """The group's half-life from ``at`` on: what was used before decays with the old one
        up to then."""
        old = self.half_life(group)
        if half_life == old:
            return
        for acc in self._groups.get(group, {}).values():
            acc.advance(at, old)
        self._half_lives[group] = half_life

    def usage(self, group: str, now: float) -> dict[Account, Amounts]:
        """Each owner's decayed usage of ``group`` at ``now``."""
        half_life = self.half_life(group)
        return {a: acc.value(now, half_life) for a, acc in self._groups.get(group, {}).items()}


# ---- the tree and its factors ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Level:
    """One node of the tree (a domain, a project or a user) in a group."""

    share: int
    """As given (1 … 10000)."""
    share_norm: float
    """S: the product down the tree of share / the sum of the active siblings' shares."""
    usage: float
    """Weighted decayed usage (weight-seconds), its owners' together."""
    usage_norm: float
    """U_norm: ``usage`` over the group's capacity held forever."""

    @property
    def factor(self) -> float:
        return math.exp2(-self.usage_norm / self.share_norm)


@dataclass(frozen=True, slots=True)
class Standing:
    """A waiting session's owner's three levels: the queue orders by their factors, highest
    first, domain before project before user."""

    domain: Level
    project: Level
    user: Level

    def key(self) -> tuple[float, float, float]:
        """Smallest first: the queue's sort key after priority."""
        return (-self.domain.factor, -self.project.factor, -self.user.factor)

    def rounded(self) -> FairShareStanding:
        """What a reason says and the log keeps: two decimals."""
        return FairShareStanding(
            domain=round(self.domain.factor, 2),
            project=round(self.project.factor, 2),
            user=round(self.user.factor, 2),
        )


@dataclass(frozen=True, slots=True)
class Tree:
    domains: dict[str, Level]
    projects: dict[tuple[str, str], Level]
    users: dict[Account, Level]

    def standing(self, account: Account) -> Standing:
        domain, project, _ = account
        return Standing(self.domains[domain], self.projects[(domain, project)], self.users[account])


def tree(
    used: Mapping[Account, float], waiting: Iterable[Account], share: ShareOf, norm: float
) -> Tree:
    """The active owners' levels. ``used``: each owner's weighted decayed usage now;
    ``waiting``: owners with a session waiting (active whatever they used); ``norm``:
    ``norm_of`` the group (0: no capacity, or every weight 0, so no usage counts: all 1)."""
    scale = 1.0 / norm if norm > 0 else 0.0
    users: dict[Account, float] = dict.fromkeys(waiting, 0.0)
    for account, value in used.items():
        if account in users or value * scale >= ACTIVE:
            users[account] = value
    projects: dict[tuple[str, str], float] = {}
    domains: dict[str, float] = {}
    for (domain, project, _), value in users.items():
        projects[(domain, project)] = projects.get((domain, project), 0.0) + value
        domains[domain] = domains.get(domain, 0.0) + value
    d_shares = {d: share("domain", d) for d in domains}
    p_shares = {p: share("project", p[1]) for p in projects}
    u_shares = {a: share("user", a[2]) for a in users}
    d_sum = sum(d_shares.values())
    p_sum: dict[str, int] = {}
    for (domain, _), given in p_shares.items():
        p_sum[domain] = p_sum.get(domain, 0) + given
    u_sum: dict[tuple[str, str], int] = {}
    for (domain, project, _), given in u_shares.items():
        u_sum[(domain, project)] = u_sum.get((domain, project), 0) + given
    d_levels = {
        d: Level(d_shares[d], d_shares[d] / d_sum, value, value * scale)
        for d, value in domains.items()
    }
    p_levels = {
        p: Level(
            p_shares[p],
            d_levels[p[0]].share_norm * p_shares[p] / p_sum[p[0]],
            value,
            value * scale,
        )
        for p, value in projects.items()
    }
    u_levels = {
        a: Level(
            u_shares[a],
            p_levels[(a[0], a[1])].share_norm * u_shares[a] / u_sum[(a[0], a[1])],
            value,
            value * scale,
        )
        for a, value in users.items()
    }
    return Tree(d_levels, p_levels, u_levels)


@dataclass(frozen=True, slots=True)
class FairShareInput:
    """What the placer needs for a fair-share group's queue: each owner's decayed usage now,
    the group's settings and the shares."""

    usage: Mapping[Account, Amounts]
    settings: FairShareSettings
    share: ShareOf


def standings(fair: FairShareInput, waiting: Iterable[Account], capacity: ResourceSlots) -> Tree:
    """The group's tree now, for the owners of ``waiting`` sessions and every active one."""
    used = {a: weigh(held, fair.settings) for a, held in fair.usage.items()}
    return tree(used, waiting, fair.share, norm_of(capacity, fair.settings))
