"""The gateway's quota fold keeps three numbers apart: held (reserved by sessions placed on
nodes), waiting (asked for by sessions not placed yet, admitted or queued) and, from the
directory, the limit. A session that waits forever is never held; a requeued one waits again;
an ended one is neither."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from events.envelope import Envelope, StoredEvent
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ZERO, ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind, quota_id_for
from services.gateway.core.folds import QuotaHoldings

SCOPE = (ScopeKind.KEYPAIR, "AK1")
ONE = ResourceSlots(cpu_milli=1000, memory_bytes=1 << 30)
BIG = ResourceSlots(cpu_milli=8000, memory_bytes=1 << 30)


class Log:
    def __init__(self) -> None:
        self.holdings, self.seq = QuotaHoldings(), 0

    def add(self, kind: AggregateType, aggregate_id: str, name: str, **payload: Any) -> None:
        self.seq += 1
        envelope = Envelope(
            event_id=f"e{self.seq}", name=name, schema_version=2 if "Quota" in name else 1,
            aggregate_type=kind, aggregate_id=aggregate_id, aggregate_version=self.seq,
            occurred_at=datetime.now(UTC), causation_id="c", correlation_id="c",
            actor=Actor.service("tests"), tenant=SYSTEM_TENANT, payload=payload,
        )  # fmt: skip
        self.holdings.apply(StoredEvent(seq=self.seq, envelope=envelope))

    def quota(self, name: str, **sessions: Any) -> None:
        self.add(AggregateType.QUOTA, quota_id_for(*SCOPE), name, sessions=sessions)

    def session(self, session_id: str, name: str) -> None:
        self.add(AggregateType.SESSION, session_id, name)

    def numbers(self) -> tuple[ResourceSlots, ResourceSlots, tuple[int, int]]:
        h = self.holdings
        return h.held(*SCOPE)[0], h.waiting(*SCOPE)[0], (h.held(*SCOPE)[1], h.waiting(*SCOPE)[1])


def test_held_and_waiting_follow_placement_and_the_end() -> None:
    log = Log()
    log.add(AggregateType.QUOTA, quota_id_for(*SCOPE), "QuotaScopeOpened", scope="keypair",
            scope_id="AK1")  # fmt: skip
    log.quota("QuotaSessionQueued", s1=ONE.model_dump(), big=BIG.model_dump())
    assert log.numbers() == (ZERO, ONE + BIG, (0, 2))

    log.quota("QuotaReserved", s1=ONE.model_dump(), big=BIG.model_dump())
    assert log.numbers() == (ZERO, ONE + BIG, (0, 2))  # admitted, not placed: still waiting

    log.session("s1", "SessionScheduled")
    assert log.numbers() == (ONE, BIG, (1, 1))  # the one that never fits is never held

    log.session("s1", "SessionRequeued")  # its node was lost: it waits again
    assert log.numbers() == (ZERO, ONE + BIG, (0, 2))

    log.session("s1", "SessionScheduled")
    log.quota("QuotaReleased", s1="session TERMINATED")
    log.session("s1", "SessionTerminated")
    assert log.numbers() == (ZERO, BIG, (0, 1))
    assert log.holdings.use(*SCOPE) == (BIG, 1, 0)  # admission's own count: reservations
