"""Snapshots of long-lived aggregates in the ``jy-snapshots`` bucket (one per aggregate).

A snapshot records the aggregate's version and the stream sequence it covers, so loading is
"snapshot + the events after its sequence", never a replay from the first event.
"""

from __future__ import annotations

from typing import Any

import nats.js.errors
from nats.js.kv import KeyValue
from pydantic import AwareDatetime, BaseModel, ConfigDict

from events.bus import Bus
from events.writes import AggregateRef
from schemas.subjects import SNAPSHOTS_BUCKET, AggregateType


class Snapshot(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    aggregate_type: AggregateType
    aggregate_id: str
    version: int
    seq: int
    taken_at: AwareDatetime
    state: dict[str, Any]

    @property
    def aggregate(self) -> AggregateRef:
        return AggregateRef(self.aggregate_type, self.aggregate_id)


def _key(aggregate: AggregateRef) -> str:
    return f"{aggregate.type.value}.{aggregate.id}"


class SnapshotStore:
    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    @classmethod
    async def open(cls, bus: Bus) -> SnapshotStore:
        return cls(await bus.js.key_value(SNAPSHOTS_BUCKET))

    async def save(self, snapshot: Snapshot) -> None:
        # Snapshots are a cache of the log: a lost or stale one only costs replay time, so a
        # plain put is enough; an older snapshot never replaces a newer one we can see.
        current = await self.load(snapshot.aggregate)
        if current is not None and current.seq >= snapshot.seq:
            return
        await self._kv.put(_key(snapshot.aggregate), snapshot.model_dump_json().encode())

    async def load(self, aggregate: AggregateRef) -> Snapshot | None:
        try:
            entry = await self._kv.get(_key(aggregate))
        except nats.js.errors.KeyNotFoundError:
            return None
        if entry.value is None:
            return None
        return Snapshot.model_validate_json(entry.value)
