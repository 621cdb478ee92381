"""Fair share replayed: each factor a waiting session's reason recorded
(``SessionPendingReasonChanged.fair_share``) is one the log implies at that event's time.
Reads ``ev.node.*`` (usage, from allocations and releases at their own times; capacity), the
sessions' events (owners, who waits), ``ev.resource_group.*`` (a group's settings and
half-life) and the shares on ``ev.domain.*``, ``ev.project.*`` and ``ev.user.*``. Pure.

The rule is ``placement.fairshare`` (its accumulators, its tree, its rounding), fed here from
the log alone, never from the scheduler's state: one usage book per group, changes in stream
order, as the scheduler's ``UsageFeed`` feeds its own, so the floats agree to the bit.

Rule ``fair-share``: a recorded standing that no admissible view of the log gives.

What the log cannot prove is how far the deciding scheduler had folded: its book holds the
changes up to its tail's position, behind its own writes and other writers' (``quota`` says
the same of limits). So the usage is taken at every position from the last change decided
more than ``GRACE_S`` before the pass up to the event, and so is the group's capacity (which
scales usage); an owner whose sessions began or stopped waiting within that grace, or wait on
a dependency or a start time (the pass may hold them back), may or may not have counted as
waiting (which makes an owner without usage active), and both are tried. Left unchecked
(``fair_shares_unchecked``): a pass within the grace of a change of a share or of the group's
settings, a group where a session from before tenancy held something (its owner is the
envelope's tenant, which this replay does not read), and a pass with more than
``MAYBE_MOST`` such owners.

Not checked: that a pass placed sessions in the order of their factors. ``SessionScheduled``
records no factor, and whether a session ahead "fit" is the placer's device-level decision
(backfill, reservations), which this replay does not repeat; a check of it would raise false
alarms.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from typing import TypeVar

from events.audit.invariants.fair_share_waiting import Waited, Waiters
from events.audit.invariants.ledgers import Payload, Slots, slots_of
from events.audit.invariants.quota import LIMIT_GRACE_S
from events.audit.invariants.report import InvariantReport
from placement.fairshare import ACTIVE, Account, UsageBook, norm_of, tree, weigh
from schemas.fair_share import SHARE_DEFAULT, FairShareSettings, FairShareStanding
from schemas.resources import ResourceSlots
from schemas.tenancy import CREATED_SCHEDULING, GroupScheduling

GRACE_S = LIMIT_GRACE_S
MAYBE_MOST = 5
NO_OWNER: Account = ("", "", "")
Change = Callable[[UsageBook], None]
Handler = Callable[[int, str, Payload], None]


def seconds(at: datetime | str) -> float:
    """An envelope's time as the scheduler's fold reads it (``occurred_at.timestamp()``)."""
    return (at if isinstance(at, datetime) else datetime.fromisoformat(at)).timestamp()


class Recent:
    """One group's usage book as far as settled, and the changes decided since."""

    def __init__(self) -> None:
        self.book = UsageBook()
        self.changes: deque[tuple[float, Change]] = deque()

    def add(self, at: float, change: Change) -> None:
        self.changes.append((at, change))
        # Long past any pass's grace: folded for good, so what is kept stays short.
        while self.changes[0][0] <= at - 2 * GRACE_S:
            self.changes.popleft()[1](self.book)

    def views(self, group: str, now: float) -> list[dict[Account, tuple[float, float, float]]]:
        """Each owner's usage at ``now`` after every position a scheduler deciding at ``now``
        may have folded to: settled ones first, then one more change at a time."""
        before = now - GRACE_S
        settled = max((i for i, (at, _) in enumerate(self.changes) if at <= before), default=-1)
        for _ in range(settled + 1):
            self.changes.popleft()[1](self.book)
        book = copy.deepcopy(self.book)
        views = [book.usage(group, now)]
        for _, change in self.changes:
            change(book)
            views.append(book.usage(group, now))
        return views


@dataclass(frozen=True, slots=True)
class Recorded:
    """A standing a reason recorded, and every view of the log its pass may have had."""

    seq: int
    session: str
    group: str
    now: float
    account: Account
    standing: FairShareStanding
    views: list[tuple[dict[Account, float], float]]
    """Each owner's weighted usage and the group's usage norm (``norm_of``), as of each
    position the pass may have folded to; the last, as of the event."""
    shares: dict[tuple[str, str], int]
    lately: list[str]
    """The group's sessions that waited at the time, or lately."""


class FairShares:
    def __init__(self, report: InvariantReport) -> None:
        self._report = report
        self.at: datetime | str = ""
        """The current event's time (the checker sets it)."""
        self._usage: dict[str, Recent] = {}
        self._kernels: dict[str, str] = {}  # kernel -> the group its usage counts in
        self._nodes: dict[str, tuple[str, Slots, frozenset[str]]] = {}  # group, capacity, off
        self._capacity: dict[str, list[tuple[float, Slots]]] = {}  # group -> its totals
        self._settings: dict[str, list[tuple[float, FairShareSettings]]] = {}  # and since
        self._shares: dict[tuple[str, str], int] = {}
        self._shares_changed = float("-inf")
        self._tainted: set[str] = set()
        self._waiters = Waiters(GRACE_S)
        self._recorded: deque[Recorded] = deque()
        """Standings not judged yet: a pass's later events (who it placed or ended) decide
        who it had waiting, so each is judged once the log is well past its pass."""

    def handlers(self) -> dict[str, Handler]:
        found: dict[str, Handler] = {
            **self._waiters.handlers(lambda: seconds(self.at)),
            "SessionPendingReasonChanged": self._reason,
            "ResourcesAllocated": self._allocated,
            "ResourcesReleased": self._released,
            "ResourceGroupCreated": self._group,
            "ResourceGroupModified": self._group,
        }
        for name in (*OFF, *ON, "NodeRegistered", "NodeCapacityChanged"):
            found[name] = self._node(name)
        for level in ("domain", "project", "user"):
            found[f"{level.title()}Created"] = found[f"{level.title()}Modified"] = self._share(
                level
            )
        return found

    # ---- what the log says ----------------------------------------------------------------

    def _allocated(self, seq: int, node: str, payload: Payload) -> None:
        kernel, at = payload["kernel_id"], seconds(self.at)
        waiter = self._waiters.sessions.get(payload["session_id"])
        if waiter is None:  # counted as the scheduler counts a session it does not know
            group, account = self._nodes.get(node, ("", (0, 0, 0), frozenset()))[0], NO_OWNER
        else:
            group, account = waiter.group, waiter.account or NO_OWNER
            if waiter.account is None:
                self._tainted.add(group)
        cpu, memory, gpu = slots_of(payload.get("slots"))
        slots = ResourceSlots.model_construct(
            cpu_milli=cpu, memory_bytes=memory, gpu_hundredths=gpu
        )
        self._kernels[kernel] = group
        self._usage.setdefault(group, Recent()).add(
            at, lambda book: book.allocate(kernel, group, account, slots, at)
        )

    def _released(self, seq: int, node: str, payload: Payload) -> None:
        kernel, at = payload["kernel_id"], seconds(self.at)
        group = self._kernels.pop(kernel, None)
        if group is not None:
            self._usage[group].add(at, lambda book: book.release(kernel, at))

    def _node(self, name: str) -> Handler:
        """A node's group, capacity or availability changed: its group's capacity is every
        available node's (``placement.pool.Pool.capacity``)."""

        def handler(seq: int, node: str, payload: Payload) -> None:
            group, capacity, off = self._nodes.get(node, ("", (0, 0, 0), frozenset()))
            group = payload.get("resource_group", group)
            if "capacity" in payload:
                capacity = slots_of(payload["capacity"])
            off = off | {name} if name in OFF else off - ON.get(name, frozenset())
            self._nodes[node] = (group, capacity, off)
            total = [0, 0, 0]
            for in_group, slots, unavailable in self._nodes.values():
                if in_group == group and not unavailable:
                    total = [a + b for a, b in zip(total, slots, strict=True)]
            history = self._capacity.setdefault(group, [(NEVER, (0, 0, 0))])
            history.append((seconds(self.at), (total[0], total[1], total[2])))

        return handler

    def _group(self, seq: int, group: str, payload: Payload) -> None:
        raw = payload.get("scheduling")
        scheduling = CREATED_SCHEDULING if raw is None else GroupScheduling.model_validate(raw)
        settings, at = scheduling.fair_share, seconds(self.at)
        self._settings.setdefault(group, [(NEVER, UNSET)]).append((at, settings))
        half_life = settings.usage_half_life_s
        self._usage.setdefault(group, Recent()).add(
            at, lambda book: book.set_half_life(group, half_life, at)
        )

    def _share(self, level: str) -> Handler:
        def handler(seq: int, key: str, payload: Payload) -> None:
            given = int(payload.get("fair_share", SHARE_DEFAULT))
            if self._shares.get((level, key), SHARE_DEFAULT) != given:
                self._shares_changed = seconds(self.at)
            self._shares[(level, key)] = given

        return handler

    # ---- a recorded standing -------------------------------------------------------------

    def _reason(self, seq: int, sid: str, payload: Payload) -> None:
        raw = payload.get("fair_share")
        if raw is None:
            return
        standing = FairShareStanding.model_validate(raw)
        now, waiter = seconds(self.at), self._waiters.sessions.get(sid)
        group = waiter.group if waiter is not None else ""
        if (
            waiter is None
            or waiter.account is None
            or group in self._tainted
            or self._shares_changed > now - GRACE_S
        ):
            self._report.fair_shares_unchecked += 1
            return
        usage = self._usage.setdefault(group, Recent()).views(group, now)
        capacities = _since(self._capacity.setdefault(group, [(NEVER, (0, 0, 0))]), now)
        views = [
            ({a: weigh(held, settings) for a, held in used.items()}, norm_of(_slots(c), settings))
            for settings in _since(self._settings.setdefault(group, [(NEVER, UNSET)]), now)
            for c in capacities
            for used in usage
        ]
        lately = self._waiters.lately(group, now)
        owners = {waiter.account, *(a for view in usage for a in view)}
        owners.update(self._waiters.sessions[s].account or NO_OWNER for s in lately)
        keys = {k for d, p, u in owners for k in (("domain", d), ("project", p), ("user", u))}
        shares = {k: self._shares[k] for k in keys if k in self._shares}
        self._recorded.append(
            Recorded(seq, sid, group, now, waiter.account, standing, views, shares, lately)
        )
        self._judge_until(now)

    def finish(self) -> None:
        self._judge_until(float("inf"))

    def _judge_until(self, now: float) -> None:
        while self._recorded and self._recorded[0].now <= now - 2 * GRACE_S:
            self._judge(self._recorded.popleft())

    def _judge(self, r: Recorded) -> None:
        sure: set[Account] = {r.account}
        maybe: set[Account] = set()
        for sid in r.lately:
            waiter = self._waiters.sessions[sid]
            waited = waiter.waited(r.seq, r.now, GRACE_S)
            if waited is not Waited.NO and waiter.account is not None:
                (sure if waited is Waited.SURE else maybe).add(waiter.account)
        maybe -= sure

        def share(level: str, key: str) -> int:
            return r.shares.get((level, key), SHARE_DEFAULT)

        for used, norm in r.views:
            scale = 1.0 / norm if norm > 0 else 0.0
            doubt = sorted(a for a in maybe if used.get(a, 0.0) * scale < ACTIVE)
            if len(doubt) > MAYBE_MOST:
                self._report.fair_shares_unchecked += 1
                return
            for k in range(len(doubt) + 1):
                for extra in combinations(doubt, k):
                    ranked = tree(used, sure.union(extra), share, norm)
                    if ranked.standing(r.account).rounded() == r.standing:
                        self._report.fair_shares += 1
                        return
        # The view at the event itself: every change before it, only the sure waiters.
        used, norm = r.views[-1]
        meant = tree(used, sure, share, norm).standing(r.account).rounded()
        said = r.standing
        domain, project, user = r.account
        text = (
            f"session {r.session} (user {user} of project {project} in domain {domain}) waited "
            f"in group {r.group} with fair-share factors {_factors(said)}; the log implies "
            f"{_factors(meant)} at that time"
        )
        self._report.add(r.seq, "fair-share", text)


OFF = frozenset({"NodeCordoned", "NodeDrainRequested", "NodeLost", "NodeRemoved"})
ON = {
    "NodeUncordoned": frozenset({"NodeCordoned", "NodeDrainRequested"}),
    "NodeRecovered": frozenset({"NodeLost"}),
}
"""What makes a node unavailable (``Node.schedulable``), and what makes it available again."""


T = TypeVar("T")
NEVER = float("-inf")
UNSET = GroupScheduling().fair_share
"""A group no event names: as the scheduler's directory has it."""


def _since(history: list[tuple[float, T]], now: float) -> list[T]:
    """A value at the last change settled before ``now`` (decided ``GRACE_S`` before), and
    each it became since, the latest last; settled changes before that one leave
    ``history``."""
    settled = max((i for i, (at, _) in enumerate(history) if at <= now - GRACE_S), default=0)
    del history[:settled]
    return list(reversed(dict.fromkeys(value for _, value in reversed(history))))


def _slots(total: Slots) -> ResourceSlots:
    cpu, memory, gpu = total
    return ResourceSlots.model_construct(cpu_milli=cpu, memory_bytes=memory, gpu_hundredths=gpu)


def _factors(standing: FairShareStanding) -> str:
    return f"domain {standing.domain:.2f}, project {standing.project:.2f}, user {standing.user:.2f}"
