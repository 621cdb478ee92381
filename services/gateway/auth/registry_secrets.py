"""Registry passwords and tokens at rest: sealed with the secrets key (Fernet) in
``jy-registry-secrets`` under ``<registry id>.<secret id>``. Reads and writes that bucket only.

Every change of a secret is a new key (a fresh secret id the registry's event names), so a
command that is refused after its secret was stored leaves the registry's current secret as it
was; each sealed value names the registry and secret id it belongs to, so a value copied to
another key does not open as that key's.
"""

from __future__ import annotations

import json

import nats.js.errors
from cryptography.fernet import InvalidToken
from nats.js.kv import KeyValue

from events.bus import Bus
from schemas.ids import new_id
from schemas.subjects import REGISTRY_SECRETS_BUCKET
from services.gateway.auth.vault import master_fernet


class RegistrySecrets:
    def __init__(self, bus: Bus, key: bytes, old_keys: tuple[bytes, ...] = ()) -> None:
        self._bus = bus
        self._fernet = master_fernet(key, old_keys)
        self._kv: KeyValue | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(REGISTRY_SECRETS_BUCKET)
        return self._kv

    async def store(self, registry_id: str, secret: str) -> str:
        """Seal and store; returns the secret id the registry's event records."""
        secret_id = new_id()
        plain = json.dumps({"registry": registry_id, "id": secret_id, "secret": secret}).encode()
        await (await self._bucket()).put(f"{registry_id}.{secret_id}", self._fernet.encrypt(plain))
        return secret_id

    async def secret(self, registry_id: str, secret_id: str) -> str | None:
        """The secret, or None when it is not stored (purged, or never stored)."""
        try:
            entry = await (await self._bucket()).get(f"{registry_id}.{secret_id}")
        except nats.js.errors.KeyNotFoundError:
            return None
        if not entry.value:
            return None
        try:
            opened = json.loads(self._fernet.decrypt(entry.value))
        except InvalidToken:
            raise RuntimeError(
                f"the secret of registry {registry_id} was sealed with another secrets key"
            ) from None
        if (opened.get("registry"), opened.get("id")) != (registry_id, secret_id):
            raise RuntimeError(f"the sealed secret under {registry_id}.{secret_id} is another's")
        return str(opened["secret"])

    async def forget(self, registry_id: str, keep: str = "") -> None:
        """Purge the registry's sealed secrets but ``keep`` (a replaced one, or all of a
        removed registry): no earlier revision is left in the bucket."""
        kv = await self._bucket()
        try:
            keys = await kv.keys()
        except nats.js.errors.NoKeysError:
            return
        for key in keys:
            if key.startswith(f"{registry_id}.") and key != f"{registry_id}.{keep}":
                await kv.purge(key)
