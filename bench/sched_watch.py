"""What the scale benchmark's client sees: which sessions were sent, when each was scheduled
or why it waits (read from ``ev.session.*`` through a JetStream consumer, as a live feed
would), the nodes registering, and the outcomes of its creates (``out.<command id>``).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from commands.outcome import Outcome
from events.bus import Bus
from events.direct import DirectReader
from events.tail import Tail
from schemas.subjects import OUTCOMES_STREAM, events_of, outcome_subject

WATCHED = frozenset({"SessionScheduled", "SessionPendingReasonChanged"})


@dataclass
class Watch:
    """What the client saw: when each session was scheduled, or why it waits."""

    sent: dict[str, float] = field(default_factory=dict)
    gpu: dict[str, int] = field(default_factory=dict)
    """Session id -> the GPU hundredths it asks for."""
    commands: dict[str, str] = field(default_factory=dict)
    """Session id -> the id of the command that created it."""
    scheduled: dict[str, float] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)
    """Session id -> its last pending reason (while not scheduled)."""
    decided: asyncio.Event = field(default_factory=asyncio.Event)
    last_change: float = 0.0
    last_send: float = 0.0

    def quiet(self, seconds: float) -> bool:
        return time.perf_counter() - max(self.last_change, self.last_send) > seconds

    def undecided(self) -> int:
        return len(self.sent) - len(self.scheduled) - len(self.waiting)


async def follow(bus: Bus, from_seq: int, watch: Watch, stop: asyncio.Event) -> None:
    tail = Tail(bus, from_seq=from_seq, subjects=[events_of("session")], names=WATCHED)
    while not stop.is_set():
        for message in await tail.fetch_raw(0.5):
            session_id = message.subject.rsplit(".", 1)[1]
            now = time.perf_counter()
            if message.headers.get("Jy-Event") == "SessionScheduled":
                watch.scheduled.setdefault(session_id, now)
                watch.waiting.pop(session_id, None)
            elif session_id not in watch.scheduled:
                watch.waiting[session_id] = json.loads(message.data)["payload"]["reason"]
            watch.last_change = now
            watch.decided.set()
    await tail.close()


async def wait_nodes(bus: Bus, count: int, timeout: float) -> float:
    tail = Tail(bus, subjects=[events_of("node")], names=frozenset({"NodeRegistered"}))
    seen, start = 0, time.perf_counter()
    while seen < count and time.perf_counter() - start < timeout:
        seen += len(await tail.fetch_raw(1.0))
    await tail.close()
    if seen < count:
        raise TimeoutError(f"only {seen} of {count} nodes registered in {timeout:.0f}s")
    return time.perf_counter() - start


async def outcome_counts(bus: Bus, command_ids: list[str]) -> Counter[str]:
    """Accepted creates, and rejected ones by reason (there should be none)."""
    reader = DirectReader(bus.replies, OUTCOMES_STREAM)
    found = await reader.last_of([outcome_subject(c) for c in command_ids])
    counts: Counter[str] = Counter()
    for message in found.values():
        outcome = Outcome.model_validate_json(message.data)
        counts["accepted" if outcome.accepted else f"rejected: {outcome.message[:100]}"] += 1
    counts["no outcome"] = len(command_ids) - len(found)
    return counts


def report(watch: Watch, begin: float) -> dict[str, float]:
    scheduled = watch.scheduled
    latencies = sorted((t - watch.sent[s]) * 1000 for s, t in scheduled.items())
    end = max(scheduled.values(), default=begin)
    rate = len(scheduled) / (end - begin) if scheduled else 0.0
    return {
        "sessions sent": len(watch.sent),
        "sessions scheduled": len(scheduled),
        "sessions never scheduled (waiting at the end)": len(watch.sent) - len(scheduled),
        "sessions decided but waiting": len(watch.waiting),
        "sessions scheduled per second (send -> observed)": rate,
        "latency p50 (ms)": statistics.median(latencies) if latencies else 0.0,
        "latency p99 (ms)": latencies[max(0, int(len(latencies) * 0.99) - 1)] if latencies else 0,
    }
