"""The credentials desk: answers an agent's request for a registry's credentials
(``jy.registry.credentials``, request/reply, one gateway of a queue group answers) with them
sealed to the key the agent sent (``schemas.sealed_box``). Reads the folded directory and
``jy-registry-secrets``; writes only replies.

The password crosses NATS only inside the box: nothing on the log, in a reply anyone else can
open, or in a log line holds it.
"""

from __future__ import annotations

import asyncio
import json
import logging

from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from commands.directory import Directory
from events.bus import Bus
from schemas.sealed_box import SealedBoxError, seal_to
from schemas.subjects import REGISTRY_CREDENTIALS_SUBJECT
from services.gateway.auth.registry_secrets import RegistrySecrets

log = logging.getLogger(__name__)

QUEUE = "gateway-registry-credentials"
MAX_REQUEST_BYTES = 1024


class CredentialsDesk:
    def __init__(self, bus: Bus, secrets: RegistrySecrets, directory: Directory) -> None:
        self._bus = bus
        self._secrets = secrets
        self._directory = directory
        self._sub: Subscription | None = None

    async def start(self) -> None:
        self._sub = await self._bus.nc.subscribe(
            REGISTRY_CREDENTIALS_SUBJECT, queue=QUEUE, cb=self._on_request
        )

    async def stop(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None

    async def _on_request(self, msg: Msg) -> None:
        try:
            answer = await self.answer(msg.data)
        except Exception:  # a desk that stops answering would fail every pull
            log.exception("registry credentials request failed")
            answer = {"error": "the gateway could not read the registry's credentials"}
        if msg.reply:
            await self._bus.nc.publish(msg.reply, json.dumps(answer).encode())

    async def answer(self, data: bytes) -> dict[str, str]:
        if len(data) > MAX_REQUEST_BYTES:
            return {"error": "the request is too large"}
        try:
            asked = json.loads(data)
            registry_id, public, node = (
                str(asked["registry"]),
                str(asked["key"]),
                str(asked["node"]),
            )
        except (ValueError, KeyError, TypeError):
            return {"error": "a request names a registry, a node and a public key"}
        registry = self._directory.registries.get(registry_id)
        if registry is None or registry.removed:
            return {"error": f"there is no registry with the id {registry_id}"}
        settings = registry.settings
        password = ""
        if settings.secret_id:
            found = await self._secrets.secret(registry_id, settings.secret_id)
            if found is None:
                return {"error": f"the secret of registry {registry.name} is missing: set it again"}
            password = found
        plain = json.dumps({"username": settings.username, "password": password}).encode()
        try:
            box = await asyncio.to_thread(seal_to, public, plain)
        except SealedBoxError as exc:
            return {"error": f"the public key cannot be used: {exc}"}
        log.info("credentials of registry %s handed to node %s", registry.name, node[:80])
        return {"box": box}
