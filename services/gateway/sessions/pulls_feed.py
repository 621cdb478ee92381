"""Live feed of the image pulls one session waits for: the ``ImagePull*`` facts of the agents
its kernels were placed on (``ev.agent.<node id>``) that name its kernels, read through one
ordered consumer from the session's placement on, together with ``ev.session.<id>`` so the
feed ends once the session runs or ends. Reads only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from events.bus import Bus
from events.domain.agent import (
    ImagePullFailed,
    ImagePullFinished,
    ImagePullProgressed,
    ImagePullStarted,
)
from events.domain.session import SessionScheduled
from events.tail import Tail
from schemas.images import PulledLayer
from schemas.subjects import AggregateType, event_subject

PULLS = frozenset(
    c.event_name
    for c in (ImagePullStarted, ImagePullProgressed, ImagePullFinished, ImagePullFailed)
)
WAITING = frozenset({"SessionRequested", "SessionAdmitted", "SessionPendingReasonChanged",
                     "SessionScheduled", "SessionPulling", "SessionRequeued"})  # fmt: skip
"""A session with one of these last still waits to run: the feed goes on."""


@dataclass(frozen=True, slots=True)
class PullUpdate:
    node_id: str
    reference: str
    status: str
    """pulling | finished | failed"""
    done_bytes: int = 0
    total_bytes: int = 0
    layers: tuple[PulledLayer, ...] = ()
    cause: str = ""
    reason: str = ""


async def session_pulls(
    bus: Bus, session_id: str, *, poll_s: float = 1.0
) -> AsyncGenerator[PullUpdate, None]:
    own = event_subject(AggregateType.SESSION, session_id)
    placed = await _placement(bus, own, poll_s)
    if placed is None:
        return
    seq, placements = placed
    kernels = set(placements)
    nodes = sorted(set(placements.values()))
    tail = Tail(
        bus, from_seq=seq + 1, batch=64,
        subjects=[own, *(event_subject(AggregateType.AGENT, n) for n in nodes)],
    )  # fmt: skip
    try:
        while True:
            for event in await tail.fetch_readable(timeout=poll_s):
                envelope = event.envelope
                if envelope.aggregate_type is AggregateType.SESSION:
                    if envelope.name not in WAITING:
                        return
                    continue
                if envelope.name not in PULLS:
                    continue
                update = _update(envelope.aggregate_id, envelope.name, envelope.payload, kernels)
                if update is not None:
                    yield update
    finally:
        await tail.close()


async def _placement(bus: Bus, own: str, poll_s: float) -> tuple[int, dict[str, str]] | None:
    """The seq and placements of the session's latest ``SessionScheduled`` once it is placed;
    None if it ends before it is placed."""
    tail = Tail(bus, subjects=[own], batch=64)
    found: tuple[int, dict[str, str]] | None = None
    try:
        while True:
            events = await tail.fetch_readable(timeout=poll_s)
            for event in events:
                name = event.envelope.name
                if name == SessionScheduled.event_name:
                    found = (event.seq, dict(event.envelope.payload.get("placements", {})))
                elif name not in WAITING:
                    # Ran or ended: a placed session's pulls are still on the log after its
                    # placement (a quick pull ends before any poll finds the log quiet).
                    return found
            if found is not None and not events:
                return found  # placed, and nothing newer: follow its pulls from here
    finally:
        await tail.close()


def _update(
    node_id: str, name: str, payload: dict[str, object], kernels: set[str]
) -> PullUpdate | None:
    waiting = payload.get("kernels")
    if not isinstance(waiting, dict) or not kernels & waiting.keys():
        return None
    ref = str(payload.get("reference", ""))
    if name == ImagePullProgressed.event_name:
        p = ImagePullProgressed.model_validate(payload)
        return PullUpdate(node_id, ref, "pulling", p.done_bytes, p.total_bytes, p.layers)
    if name == ImagePullFinished.event_name:
        return PullUpdate(node_id, ref, "finished")
    if name == ImagePullFailed.event_name:
        f = ImagePullFailed.model_validate(payload)
        return PullUpdate(node_id, ref, "failed", cause=f.cause, reason=f.reason)
    return PullUpdate(node_id, ref, "pulling")
