"""The gateway's quota fold: holdings are sets keyed by session id, so repeats change nothing;
v1 events (one session each) and v2 ones (many) are folded alike."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from events.envelope import Envelope, StoredEvent
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind, quota_id_for
from services.gateway.core.folds import QuotaHoldings

SCOPE = (ScopeKind.PROJECT, "p1")
GPU = ResourceSlots(gpu_hundredths=100, cpu_milli=500)


class Log:
    def __init__(self, holdings: QuotaHoldings) -> None:
        self.holdings, self.seq = holdings, 0
        self.version = 1
        """The schema version the events are written in (v2 names many sessions)."""

    def add(self, name: str, **payload: Any) -> None:
        self.seq += 1
        envelope = Envelope(
            event_id=f"e{self.seq}",
            name=name,
            schema_version=self.version if name != "QuotaScopeOpened" else 1,
            aggregate_type=AggregateType.QUOTA,
            aggregate_id=quota_id_for(*SCOPE),
            aggregate_version=self.seq,
            occurred_at=datetime.now(UTC),
            causation_id="c",
            correlation_id="c",
            actor=Actor.service("tests"),
            tenant=SYSTEM_TENANT,
            payload=payload,
        )
        self.holdings.apply(StoredEvent(seq=self.seq, envelope=envelope))


def test_queued_then_reserved_then_released() -> None:
    holdings = QuotaHoldings()
    log = Log(holdings)
    slots = GPU.model_dump()
    log.add("QuotaScopeOpened", scope="project", scope_id="p1")
    log.add("QuotaSessionQueued", session_id="s1", slots=slots)
    log.add("QuotaSessionQueued", session_id="s2", slots=slots)
    assert holdings.use(*SCOPE) == (ResourceSlots(), 0, 2)
    assert holdings.queued_slots(*SCOPE) == GPU + GPU

    log.add("QuotaReserved", session_id="s1", slots=slots)
    log.add("QuotaReserved", session_id="s1", slots=slots)  # written twice: held once
    assert holdings.use(*SCOPE) == (GPU, 1, 1)

    log.add("QuotaSessionDequeued", session_id="s2", reason="cancelled")
    log.add("QuotaReleased", session_id="s1", reason="terminated")
    assert holdings.use(*SCOPE) == (ResourceSlots(), 0, 0)
    assert holdings.use(ScopeKind.DOMAIN, "elsewhere") == (ResourceSlots(), 0, 0)


def test_events_naming_many_sessions_hold_and_free_each() -> None:
    holdings = QuotaHoldings()
    log = Log(holdings)
    slots = GPU.model_dump()
    log.add("QuotaScopeOpened", scope="project", scope_id="p1")
    log.version = 2
    log.add("QuotaSessionQueued", sessions={"s1": slots, "s2": slots, "s3": slots})
    log.add("QuotaReserved", sessions={"s1": slots, "s2": slots})
    assert holdings.use(*SCOPE) == (GPU + GPU, 2, 1)

    log.add("QuotaSessionDequeued", sessions={"s3": "cancelled"})
    log.add("QuotaReleased", sessions={"s1": "terminated", "s2": "terminated"})
    assert holdings.use(*SCOPE) == (ResourceSlots(), 0, 0)
