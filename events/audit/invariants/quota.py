"""Quota holdings replayed against the limits the log says applied: no scope's reservations
(or, on a keypair, its queue) exceed its limits at any position, and (once settled) no ended
session still holds a reservation. Reads ``ev.quota.*`` (holdings) and the tenancy aggregates
``ev.domain.*``, ``ev.project.*``, ``ev.keypair.*`` and ``ev.resource_policy.*`` (limits).
Pure; the limit test itself is ``schemas.tenancy.SlotLimits.over``, as admission's.

Rules:

- ``quota``, at the ``QuotaReserved`` that breaks it: a scope whose reserved slots exceed its
  limits, a keypair over its policy's concurrent sessions, a keypair scope reserved on while
  the log names no policy for it; at a ``QuotaSessionQueued``: a keypair queue over its
  policy's max pending sessions or max pending slots. The user scope has no limits.
- ``not-given-back`` (``settled``): a session that ended and is still reserved or queued on a
  scope.

What the log cannot prove: which limits the admitting scheduler had folded. It decides on its
own fold of the log, which may lag a tenancy change stored just before its write (the quota
write is guarded, the tenancy aggregates are not). So a limit change is taken to apply to
reservations decided (``occurred_at``) more than ``LIMIT_GRACE_S`` after it was stored;
within that grace a reservation that fits the limits just before the change passes. Lower
limits never make a scope's existing holdings a violation (nothing running is evicted), as a
shrinking node capacity does not; only reservations are judged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from events.audit.invariants.ledgers import SLOT_FIELDS, Payload, Slots, slots_of
from events.audit.invariants.report import InvariantReport
from schemas.resources import ResourceSlots
from schemas.tenancy import DefaultForUnspecified, KeypairPolicyLimits, SlotLimits

LIMIT_GRACE_S = 10.0
T = TypeVar("T")


@dataclass(slots=True)
class Versioned(Generic[T]):
    """A limit source's current value, and the one it replaced (and when)."""

    current: T
    previous: T | None = None
    changed_at: datetime | None = None

    def change(self, value: T, at: datetime) -> None:
        if value != self.current:
            self.previous, self.current, self.changed_at = self.current, value, at

    def values(self, at: datetime) -> list[T]:
        """What may have applied to a decision made at ``at``."""
        fresh = self.changed_at is not None and at < self.changed_at + GRACE
        return (
            [self.current, self.previous] if fresh and self.previous is not None else [self.current]
        )


GRACE = timedelta(seconds=LIMIT_GRACE_S)
NOTHING = (SlotLimits(), DefaultForUnspecified.LIMITED)
"""What an unknown project or domain may hold (as the directory says)."""


class Held:
    """Sessions (id -> slots and the position that holds them) and their running sum."""

    def __init__(self) -> None:
        self.sessions: dict[str, tuple[Slots, int]] = {}
        self.sum = [0, 0, 0]

    def put(self, session_id: str, slots: Slots, seq: int) -> None:
        self.take(session_id)
        self.sessions[session_id] = (slots, seq)
        for i, amount in enumerate(slots):
            self.sum[i] += amount

    def take(self, session_id: str) -> None:
        found = self.sessions.pop(session_id, None)
        for i, amount in enumerate(found[0] if found is not None else ()):
            self.sum[i] -= amount

    def total(self) -> ResourceSlots:
        cpu, memory, gpu = self.sum
        return ResourceSlots.model_construct(cpu_milli=cpu, memory_bytes=memory, gpu_hundredths=gpu)


@dataclass(slots=True)
class Holdings:
    scope: str
    scope_id: str
    queued: Held = field(default_factory=Held)
    reserved: Held = field(default_factory=Held)


def at_of(value: datetime | str) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


class Quotas:
    def __init__(self, report: InvariantReport) -> None:
        self._report = report
        self.at: datetime | str = datetime.min
        """When the event being applied was decided (set by the checker before each)."""
        self.scopes: dict[str, Holdings] = {}
        self._domains: dict[str, Versioned[SlotLimits]] = {}
        self._projects: dict[str, Versioned[SlotLimits]] = {}
        self._keypairs: dict[str, Versioned[str]] = {}  # access key -> policy name
        self._policies: dict[str, Versioned[KeypairPolicyLimits | None]] = {}  # by policy id

    def handlers(self) -> dict[str, Callable[[int, str, Payload], None]]:
        def limits(into: dict[str, Versioned[Any]], read: Callable[[Payload], Any]) -> Any:
            def note(seq: int, aggregate_id: str, payload: Payload) -> None:
                value = read(payload)
                known = into.get(aggregate_id)
                if known is None:
                    into[aggregate_id] = Versioned(value)
                else:
                    known.change(value, at_of(self.at))

            return note

        def slots(payload: Payload) -> SlotLimits:
            return SlotLimits.model_validate(payload.get("total_resource_slots") or {})

        def policy(payload: Payload) -> KeypairPolicyLimits | None:
            found = payload.get("keypair")
            return None if found is None else KeypairPolicyLimits.model_validate(found)

        def policy_name(payload: Payload) -> str:
            return str(payload.get("policy", "default"))

        return {
            **dict.fromkeys(("DomainCreated", "DomainModified"), limits(self._domains, slots)),
            **dict.fromkeys(("ProjectCreated", "ProjectModified"), limits(self._projects, slots)),
            **dict.fromkeys(
                ("KeypairCreated", "KeypairModified"), limits(self._keypairs, policy_name)
            ),
            **dict.fromkeys(
                ("ResourcePolicyCreated", "ResourcePolicyModified"), limits(self._policies, policy)
            ),
            "QuotaScopeOpened": self._opened,
            "QuotaSessionQueued": self._queued,
            "QuotaSessionDequeued": self._dequeued,
            "QuotaReserved": self._reserved,
            "QuotaReleased": self._released,
        }

    def _holdings(self, quota_id: str) -> Holdings:
        found = self.scopes.get(quota_id)
        if found is None:
            kind, _, scope_id = quota_id.partition("-")
            found = self.scopes[quota_id] = Holdings(kind, scope_id)
        return found

    def _opened(self, seq: int, quota_id: str, payload: Payload) -> None:
        self.scopes[quota_id] = Holdings(str(payload["scope"]), str(payload["scope_id"]))

    def _queued(self, seq: int, quota_id: str, payload: Payload) -> None:
        scope = self._holdings(quota_id)
        for sid, slots in payload["sessions"].items():
            scope.queued.put(sid, slots_of(slots), seq)
        if scope.scope != "keypair":
            return
        waiting, count = scope.queued.total(), len(scope.queued.sessions)
        candidates = self._keypair_limits(scope.scope_id)
        if candidates and all(
            (c.max_pending_sessions is not None and count > c.max_pending_sessions)
            or c.max_pending_resource_slots.over(waiting, DefaultForUnspecified.UNLIMITED)
            for c in candidates
        ):
            text = f"keypair {scope.scope_id} queue over its max pending: {count} sessions"
            self._report.add(seq, "quota", f"{text}, {_amounts(waiting)}")

    def _dequeued(self, seq: int, quota_id: str, payload: Payload) -> None:
        scope = self._holdings(quota_id)
        for sid in payload["sessions"]:
            scope.queued.take(sid)

    def _released(self, seq: int, quota_id: str, payload: Payload) -> None:
        scope = self._holdings(quota_id)
        for sid in payload["sessions"]:
            scope.reserved.take(sid)

    def _reserved(self, seq: int, quota_id: str, payload: Payload) -> None:
        self._report.reservations += 1
        scope = self._holdings(quota_id)
        for sid, slots in payload["sessions"].items():
            scope.queued.take(sid)
            scope.reserved.put(sid, slots_of(slots), seq)
        held, count = scope.reserved.total(), len(scope.reserved.sessions)
        name = f"{scope.scope} {scope.scope_id}"
        if scope.scope == "keypair":
            keypair = self._keypair_limits(scope.scope_id)
            if not keypair:
                self._report.add(seq, "quota", f"{name} reserved on with no resource policy known")
                return
            limits = [
                (k.total_resource_slots, k.default_for_unspecified, k.max_concurrent_sessions)
                for k in keypair
            ]
        elif scope.scope in ("project", "domain"):
            source = (self._projects if scope.scope == "project" else self._domains).get(
                scope.scope_id
            )
            at = at_of(self.at)
            values = source.values(at) if source is not None else [NOTHING[0]]
            unspecified = DefaultForUnspecified.UNLIMITED if source is not None else NOTHING[1]
            limits = [(v, unspecified, None) for v in values]
        else:
            return  # the user scope has no limits
        overs = [
            slots.over(held, unspecified)
            + ([("sessions", count, most)] if most is not None and count > most else [])
            for slots, unspecified, most in limits
        ]
        if all(overs):
            over = ", ".join(f"{slot} {amount}/{limit}" for slot, amount, limit in overs[0])
            self._report.add(seq, "quota", f"{name} over its limits: {over}")

    def _keypair_limits(self, access_key: str) -> list[KeypairPolicyLimits]:
        """Every keypair policy that may have applied at this position; [] if none is known."""
        at = at_of(self.at)
        names = self._keypairs.get(access_key)
        found: list[KeypairPolicyLimits] = []
        for name in names.values(at) if names is not None else []:
            versions = self._policies.get(f"keypair-{name}")
            for value in versions.values(at) if versions is not None else []:
                if value is not None:
                    found.append(value)
        return found

    def finish(self, ended: Callable[[str], bool], *, settled: bool) -> None:
        if not settled:
            return
        for quota_id, scope in self.scopes.items():
            for what, held in (("reserved", scope.reserved), ("queued", scope.queued)):
                for sid, (_, seq) in held.sessions.items():
                    if ended(sid):
                        text = f"session {sid} ended and is still {what} on {quota_id}"
                        self._report.add(seq, "not-given-back", text)


def _amounts(slots: ResourceSlots) -> str:
    amounts = (slots.cpu_milli, slots.memory_bytes, slots.gpu_hundredths)
    return ", ".join(f"{what} {amount}" for what, amount in zip(SLOT_FIELDS, amounts, strict=True))
