"""Replays the whole log through the invariant check: reads every ``ev.>`` message of
``JY_EVENTS`` in order, up to the stream's last sequence when the replay starts, through an
ordered consumer (``events.tail.Tail``), decoding each envelope as a plain dict (no pydantic
model per event). An event that does not decode is reported and the replay goes on.
"""

from __future__ import annotations

import gc
import json
from typing import Any

from events.audit.invariants.check import Checker
from events.audit.invariants.report import InvariantReport
from events.bus import Bus
from events.catalogue import CATALOGUE, UnknownEventError
from events.direct import RawMessage
from events.envelope import Envelope
from events.tail import Tail
from schemas.subjects import EVENTS_STREAM

BATCH = 1024
_FIELDS = (
    "name",
    "aggregate_type",
    "aggregate_id",
    "event_id",
    "causation_id",
    "occurred_at",
)


async def replay_log(bus: Bus, *, settled: bool = True) -> InvariantReport:
    """Check every event stored when the replay starts (later ones are left for the next)."""
    info = await bus.js.stream_info(EVENTS_STREAM)
    last = int(info.state.last_seq)
    checker = Checker()
    tail = Tail(bus, from_seq=1, batch=BATCH)
    # The fold only grows (no cycles to collect), and the collector's full passes over
    # millions of small objects cost more than the fold itself: off while it runs.
    collecting = gc.isenabled()
    gc.disable()
    try:
        while tail.position < last:
            try:
                batch = await tail.fetch_raw(timeout=1.0)
            except TimeoutError:  # nats-py's own, raised when the loop is busy: read again
                continue
            for message in batch:
                if message.seq <= last:
                    read(checker, message)
            if not batch and await tail.num_pending() == 0:
                break  # nothing more to read (the stream's end moved back: never, but safe)
    finally:
        if collecting:
            gc.enable()
        await tail.close()
    return checker.finish(settled=settled)


def read(checker: Checker, message: RawMessage) -> None:
    """Decode one stored message into the checker, or report why it does not decode."""
    try:
        envelope: dict[str, Any] = json.loads(message.data)
        name, kind, aggregate_id, event_id, cause, at = (envelope[f] for f in _FIELDS)
        version, schema, payload = (
            envelope["aggregate_version"],
            envelope["schema_version"],
            envelope["payload"],
        )
        if not (
            all(isinstance(v, str) for v in (name, kind, aggregate_id, event_id, cause, at))
            and type(version) is int
            and type(schema) is int
            and isinstance(payload, dict)
        ):
            raise ValueError("an envelope field has the wrong type")
    except (ValueError, KeyError, TypeError) as exc:  # JSON and UTF-8 errors are ValueErrors
        checker.undecodable(message.seq, f"{message.subject}: {exc}")
        return
    if message.subject != f"ev.{kind}.{aggregate_id}":
        where = f"ev.{kind}.{aggregate_id}"
        checker.undecodable(message.seq, f"{message.subject}: the envelope names {where}")
        return
    payload = _upcast(name, schema, payload, envelope)
    checker.apply(message.seq, name, kind, aggregate_id, version, event_id, cause, at, payload)


def _upcast(name: str, schema: int, payload: dict[str, Any], raw: dict[str, Any]) -> Any:
    """The payload at its event's current schema version (as ``events.store.decode`` does);
    an event of unknown name or newer version passes as it is."""
    try:
        if CATALOGUE.event_class(name).schema_version == schema:
            return payload
        return CATALOGUE.upcast(Envelope.model_construct(**raw)).payload
    except UnknownEventError:
        return payload
