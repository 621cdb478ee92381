"""Secrets at rest: keypair secret keys (``jy-secrets``), per-person keys that seal personal
data in events (``jy-people``) and password hashes (``jy-credentials``). Reads and writes
those three buckets only.

HMAC needs the server to read a secret key, so secrets are encrypted (Fernet) with the master
key from settings rather than hashed; each sealed value also names what it belongs to, so a
value copied to another KV key does not decrypt as that key's secret.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import secrets
import time

import nats.js.errors
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from nats.js.kv import KeyValue

from events.bus import Bus, is_unavailable
from schemas.subjects import CREDENTIALS_BUCKET, PEOPLE_BUCKET, SECRETS_BUCKET

CACHE_S = 5.0
LOOKUP_TIMEOUT_S = 1.0
"""A secret's lookup slower than this is taken as the bucket out of reach."""
"""How long a decrypted secret is reused: a rotated secret reaches every gateway this late."""

_BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


log = logging.getLogger(__name__)


def new_access_key() -> str:
    """``AK`` and 18 base32 characters (90 random bits): subject- and KV-safe."""
    return "AK" + "".join(secrets.choice(_BASE32) for _ in range(18))


def new_secret_key() -> str:
    return secrets.token_urlsafe(30)


def email_key_of(key: bytes) -> bytes:
    """The key of email digests, derived from the secrets key (one secret to keep)."""
    return hmac.new(key, b"jetyard email digest", hashlib.sha256).digest()


def key_fingerprint(key: bytes) -> str:
    """Names a master key without revealing it: which key sealed a value."""
    return hashlib.sha256(key).hexdigest()[:8]


def master_fernet(key: bytes, old_keys: tuple[bytes, ...]) -> MultiFernet:
    # The first key seals; every key unseals, so the master key can be rotated by moving the
    # old one to ``old_keys`` until every value has been sealed again.
    return MultiFernet([Fernet(k) for k in (key, *old_keys)])


async def _get(kv: KeyValue, key: str) -> bytes | None:
    try:
        entry = await kv.get(key)
    except nats.js.errors.KeyNotFoundError:  # also deleted and purged keys
        return None
    return entry.value or None


class SecretVault:
    """Keypair secret keys, encrypted under their access key in ``jy-secrets``."""

    def __init__(self, bus: Bus, key: bytes, old_keys: tuple[bytes, ...] = ()) -> None:
        self._bus = bus
        self._fernet = master_fernet(key, old_keys)
        self._fingerprint = key_fingerprint(key)
        self._kv: KeyValue | None = None
        self._cache: dict[str, tuple[float, str]] = {}

    @staticmethod
    def generate_key() -> bytes:
        return Fernet.generate_key()

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(SECRETS_BUCKET)
        return self._kv

    async def store_secret(self, access_key: str, secret: str) -> str:
        """Seal and store; returns the key id the ``KeypairCreated`` event records."""
        plain = json.dumps({"access_key": access_key, "secret": secret}).encode()
        await (await self._bucket()).put(access_key, self._fernet.encrypt(plain))
        self._cache.pop(access_key, None)
        return f"{SECRETS_BUCKET}/{access_key}#{self._fingerprint}"

    async def secret(self, access_key: str) -> str | None:
        now = time.monotonic()
        cached = self._cache.get(access_key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            sealed = await asyncio.wait_for(self._sealed(access_key), LOOKUP_TIMEOUT_S)
        except Exception as exc:
            # The bucket out of reach (no quorum here): the secret last read is still the
            # secret, since a change of it cannot be stored meanwhile either.
            if cached is None or not is_unavailable(exc):
                raise
            return cached[1]
        if sealed is None:
            return None
        try:
            opened = json.loads(self._fernet.decrypt(sealed))
        except InvalidToken:
            raise RuntimeError(
                f"the secret of {access_key} was sealed with another master key: "
                "set the key it was stored with (or add it to the old keys)"
            ) from None
        if opened.get("access_key") != access_key:
            raise RuntimeError(f"the sealed secret stored under {access_key} is for another key")
        secret = str(opened["secret"])
        self._cache[access_key] = (now + CACHE_S, secret)
        return secret

    async def _sealed(self, access_key: str) -> bytes | None:
        return await _get(await self._bucket(), access_key)

    async def delete_secret(self, access_key: str) -> None:
        self._cache.pop(access_key, None)
        await (await self._bucket()).purge(access_key)


class PeopleVault:
    """One Fernet key per person, itself sealed with the master key in ``jy-people``.

    Personal data (an email) enters the event log sealed with the person's key; forgetting the
    person purges the key, and every copy of their data in the log becomes unreadable.
    """

    def __init__(self, bus: Bus, key: bytes, old_keys: tuple[bytes, ...] = ()) -> None:
        self._bus = bus
        self._fernet = master_fernet(key, old_keys)
        self._kv: KeyValue | None = None
        self._cache: dict[str, tuple[float, Fernet]] = {}

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(PEOPLE_BUCKET)
        return self._kv

    async def _person_key(self, user_id: str, *, create: bool) -> Fernet | None:
        now = time.monotonic()
        cached = self._cache.get(user_id)
        if cached is not None and cached[0] > now:
            return cached[1]
        kv = await self._bucket()
        sealed = await _get(kv, user_id)
        if sealed is None:
            if not create:
                return None
            fresh = Fernet.generate_key()
            plain = json.dumps({"user_id": user_id, "key": fresh.decode()}).encode()
            try:
                await kv.create(user_id, self._fernet.encrypt(plain))
            except nats.js.errors.KeyWrongLastSequenceError:
                # Another gateway made this person's key first: use theirs.
                return await self._person_key(user_id, create=False)
            person = Fernet(fresh)
        else:
            opened = json.loads(self._fernet.decrypt(sealed))
            if opened.get("user_id") != user_id:
                raise RuntimeError(f"the person key stored under {user_id} is someone else's")
            person = Fernet(opened["key"].encode())
        self._cache[user_id] = (now + CACHE_S, person)
        return person

    async def seal(self, user_id: str, text: str) -> str:
        person = await self._person_key(user_id, create=True)
        assert person is not None
        return person.encrypt(text.encode()).decode()

    async def unseal(self, user_id: str, sealed: str) -> str | None:
        """The text, or None once the person was forgotten (their key is gone, or was made
        again after ``forget`` and so cannot open what the old one sealed), or when their key
        was sealed under another vault key than this gateway's (a misconfigured replica: logged;
        one such person does not break a listing of many)."""
        try:
            person = await self._person_key(user_id, create=False)
        except InvalidToken:
            log.warning(
                "the person key of %s is sealed under another key than this gateway's: "
                "check JETYARD_GATEWAY_SECRETS_KEY on every gateway",
                user_id,
            )
            return None
        if person is None:
            return None
        try:
            return person.decrypt(sealed.encode()).decode()
        except InvalidToken:
            return None

    async def forget(self, user_id: str) -> None:
        self._cache.pop(user_id, None)
        # A purge (not a delete) leaves no earlier revision of the key in the stream.
        await (await self._bucket()).purge(user_id)


class PasswordStore:
    """argon2id password hashes by user id in ``jy-credentials``. Hashing runs in a thread:
    it is deliberately slow and must not stall the event loop."""

    def __init__(self, bus: Bus, hasher: PasswordHasher | None = None) -> None:
        self._bus = bus
        self._hasher = hasher or PasswordHasher()
        self._kv: KeyValue | None = None
        self._dummy: str | None = None

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await self._bus.js.key_value(CREDENTIALS_BUCKET)
        return self._kv

    async def set_password(self, user_id: str, password: str) -> None:
        hashed = await asyncio.to_thread(self._hasher.hash, password)
        await (await self._bucket()).put(user_id, hashed.encode())

    async def has_password(self, user_id: str) -> bool:
        return await _get(await self._bucket(), user_id) is not None

    async def verify(self, user_id: str, password: str) -> bool:
        stored = await _get(await self._bucket(), user_id)
        if stored is None:
            # Hash anyway, so "no such user" takes as long as "wrong password".
            if self._dummy is None:
                self._dummy = await asyncio.to_thread(self._hasher.hash, secrets.token_hex(16))
            await asyncio.to_thread(self._check, self._dummy, password)
            return False
        hashed = stored.decode()
        if not await asyncio.to_thread(self._check, hashed, password):
            return False
        if self._hasher.check_needs_rehash(hashed):
            await self.set_password(user_id, password)
        return True

    async def delete_password(self, user_id: str) -> None:
        await (await self._bucket()).purge(user_id)

    def _check(self, hashed: str, password: str) -> bool:
        try:
            return self._hasher.verify(hashed, password)
        except (VerificationError, InvalidHashError):  # a mismatch is a VerificationError
            return False
