"""The agent's heartbeat: key ``agent.<node id>`` in the ``jy-heartbeats`` KV bucket, refreshed
every interval. Writes that key; the scheduler watches the bucket and declares a node lost when
the key expires.

The bucket's TTL (3x the interval, with limit markers so expiry is seen) is set by
``ensure_streams``. nats-py's ``kv.put`` takes no per-message TTL, so the refresh is a plain put
and the bucket's TTL is what expires it: an agent that stops refreshing disappears after three
intervals, which is what the scheduler needs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import datetime

import nats.errors
from nats.js.kv import KeyValue

from events.bus import Bus
from events.cancelling import cancelling
from schemas.subjects import HEARTBEATS_BUCKET

log = logging.getLogger(__name__)


def heartbeat_key(agent_id: str) -> str:
    return f"agent.{agent_id}"


def heartbeat_value(agent_id: str, epoch: int, hostname: str, now: datetime) -> bytes:
    return json.dumps(
        {"agent_id": agent_id, "epoch": epoch, "hostname": hostname, "at": now.isoformat()}
    ).encode()


class Heartbeat:
    def __init__(
        self,
        kv: KeyValue,
        agent_id: str,
        hostname: str,
        interval_s: float,
        clock: Callable[[], datetime],
    ) -> None:
        self._kv = kv
        self._agent_id = agent_id
        self._hostname = hostname
        self._interval_s = interval_s
        self._clock = clock

    @classmethod
    async def open(
        cls,
        bus: Bus,
        agent_id: str,
        hostname: str,
        interval_s: float,
        clock: Callable[[], datetime],
    ) -> Heartbeat:
        kv = await bus.js.key_value(HEARTBEATS_BUCKET)
        return cls(kv, agent_id, hostname, interval_s, clock)

    async def beat(self, epoch: int) -> None:
        await self._kv.put(
            heartbeat_key(self._agent_id),
            heartbeat_value(self._agent_id, epoch, self._hostname, self._clock()),
        )

    async def run(self, epoch: Callable[[], int], tick: Callable[[], None]) -> None:
        """Refresh until cancelled; ``tick()`` after each attempt (the agent checks for a
        reconnect there). A failed refresh is retried at the next interval: missing a few is
        what the TTL allows for."""
        failing = False
        while not cancelling():
            await asyncio.sleep(self._interval_s)
            try:
                await self.beat(epoch())
                if failing:
                    log.info("agent %s: heartbeat refreshed again", self._agent_id)
                failing = False
            except (nats.errors.Error, TimeoutError) as exc:
                if cancelling():
                    raise asyncio.CancelledError from exc
                if not failing:
                    log.warning("agent %s: heartbeat not refreshed: %r", self._agent_id, exc)
                failing = True
            tick()
