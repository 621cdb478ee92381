"""An agent asks the gateway for a registry's credentials (``jy.registry.credentials``,
request/reply) with a fresh key of its own, and opens the sealed answer
(``schemas.sealed_box``): the password never crosses NATS in clear and never reaches the log.
Reads and writes only that request and its reply.
"""

from __future__ import annotations

import asyncio
import json

import nats.errors
from nats.aio.msg import Msg

from events.bus import Bus
from schemas.sealed_box import BoxKey, SealedBoxError
from schemas.subjects import REGISTRY_CREDENTIALS_SUBJECT
from services.node.pulls import PullFailedError, RegistryAuth

RETRIES_S = (1.0, 2.0, 4.0, 8.0)
"""Waits between asks while no gateway answers (one restarting): 15 s in all, then the pull
fails (its own time limit bounds it too)."""


class RegistryCredentials:
    def __init__(
        self, bus: Bus, node_id: str, *, timeout_s: float = 10.0,
        retries_s: tuple[float, ...] = RETRIES_S,
    ) -> None:  # fmt: skip
        self._bus = bus
        self._node_id = node_id
        self._timeout_s = timeout_s
        self._retries_s = retries_s

    async def __call__(self, registry_id: str) -> RegistryAuth | None:
        """The registry's credentials (None: it has none: anonymous pulls). A registry the
        gateway does not know, or no gateway answering, fails the pull with a reason."""
        key = await asyncio.to_thread(BoxKey)
        asked = {"registry": registry_id, "node": self._node_id, "key": key.public}
        reply = await self._ask(json.dumps(asked).encode())
        try:
            answer = json.loads(reply.data)
        except ValueError as exc:
            raise PullFailedError("other", "the gateway's answer could not be read") from exc
        if "error" in answer:
            raise PullFailedError("other", f"registry credentials: {answer['error']}")
        try:
            opened = json.loads(await asyncio.to_thread(key.open, str(answer.get("box", ""))))
        except (SealedBoxError, ValueError) as exc:
            raise PullFailedError("other", f"the credentials could not be opened: {exc}") from exc
        username, password = str(opened.get("username", "")), str(opened.get("password", ""))
        if not username and not password:
            return None
        return RegistryAuth(username, password)

    async def _ask(self, request: bytes) -> Msg:
        for wait in (*self._retries_s, None):
            try:
                return await self._bus.nc.request(
                    REGISTRY_CREDENTIALS_SUBJECT, request, timeout=self._timeout_s
                )
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError) as exc:
                if wait is None:
                    raise PullFailedError(
                        "other", "no gateway answered the request for the registry's credentials"
                    ) from exc
                await asyncio.sleep(wait)
        raise AssertionError("unreachable")
