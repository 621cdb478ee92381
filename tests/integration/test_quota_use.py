"""The gateway's quota use on a real log: it catches up at start, follows what is written
afterwards, and ``sync`` returns once what was stored before it is folded."""

from __future__ import annotations

from typing import Any

from events.bus import Bus
from events.envelope import Envelope
from events.store import EventStore
from events.writes import AggregateRef, Write
from schemas.ids import new_id
from schemas.resources import ZERO, ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import ScopeKind, quota_id_for
from services.gateway.core.folds import QuotaUse
from tests.support import envelope

GPU = ResourceSlots(gpu_hundredths=100, cpu_milli=500)


def quota_event(quota: AggregateRef, version: int, name: str, **payload: Any) -> Envelope:
    return envelope(quota, version, name=name, payload=payload)


async def test_quota_use_catches_up_then_follows_the_log(bus: Bus) -> None:
    store = EventStore(bus)
    project = f"p-{new_id()[:8]}"
    scope = (ScopeKind.PROJECT, project)
    quota = AggregateRef(AggregateType.QUOTA, quota_id_for(*scope))
    slots = GPU.model_dump()
    opened = await store.append(
        Write.create(
            quota,
            quota_event(quota, 1, "QuotaScopeOpened", scope="project", scope_id=project),
            quota_event(quota, 2, "QuotaSessionQueued", session_id="s1", slots=slots),
            quota_event(quota, 3, "QuotaSessionQueued", session_id="s2", slots=slots),
        )
    )
    use = QuotaUse(bus, poll_timeout_s=0.2, retry_after_s=0.2)
    await use.start()
    try:
        # Caught up at start: what the log held is there before anyone asks.
        assert use.use(*scope) == (ZERO, 0, 2)
        assert use.queued_slots(*scope) == GPU + GPU

        reserved = quota_event(quota, 4, "QuotaReserved", session_id="s1", slots=slots)
        await store.append(Write.after(quota, opened.seqs[-1], reserved))
        await use.sync(timeout=5.0)
        assert use.use(*scope) == (GPU, 1, 1)
        # With nothing new for it, sync returns all the same (a read found nothing more).
        await use.sync(timeout=5.0)
    finally:
        await use.stop()
