"""What the app proxies say of each endpoint's traffic now: their load reports, heard live on
core NATS ``jy.serving.load.*`` (every second from each proxy replica; not kept) into a
``schemas.serving_load.LoadBoard``, the same board the serving controller's scaling rules
read. Request rate, requests in flight and latency quantiles are measurements, not state: they
are never on the log, and a gateway that just started knows them after a few seconds."""

from __future__ import annotations

import logging
import time

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from events.bus import Bus
from schemas.serving_load import LoadBoard
from schemas.subjects import SERVING_LOAD_PREFIX

log = logging.getLogger(__name__)

RATE_WINDOW_S = 10.0
LATENCY_WINDOW_S = 60.0


class ServingTraffic:
    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self.board = LoadBoard(time.time)
        self._subscription: Subscription | None = None

    async def start(self) -> None:
        self._subscription = await self._bus.nc.subscribe(
            f"{SERVING_LOAD_PREFIX}.*", cb=self._heard
        )

    async def _heard(self, message: Msg) -> None:
        self.board.take(message.data)

    async def stop(self) -> None:
        if self._subscription is not None:
            subscription, self._subscription = self._subscription, None
            try:
                await subscription.unsubscribe()
            except Exception as exc:  # a closed connection: nothing left to stop
                log.debug("gateway: serving traffic unsubscribe: %r", exc)
