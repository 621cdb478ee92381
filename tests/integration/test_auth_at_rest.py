"""Authentication's stores on a real NATS server: secrets, person keys and passwords at rest,
nonces and login tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from argon2 import PasswordHasher

from events.bus import Bus
from schemas.ids import new_id
from schemas.subjects import CREDENTIALS_BUCKET, LOGINS_BUCKET, SECRETS_BUCKET
from services.gateway.auth.logins import LoginStore
from services.gateway.auth.nonces import NonceStore
from services.gateway.auth.vault import (
    PasswordStore,
    PeopleVault,
    SecretVault,
    key_fingerprint,
    new_access_key,
    new_secret_key,
)
from tests.integration.auth_support import (
    CHEAP,
)

# ---- secrets, people, passwords at rest ----------------------------------------------------


async def test_secret_round_trip_is_encrypted_at_rest(bus: Bus) -> None:
    master = SecretVault.generate_key()
    vault = SecretVault(bus, master)
    access_key, secret = new_access_key(), new_secret_key()

    key_id = await vault.store_secret(access_key, secret)

    assert key_id == f"jy-secrets/{access_key}#{key_fingerprint(master)}"
    assert await SecretVault(bus, master).secret(access_key) == secret
    stored = (await (await bus.js.key_value(SECRETS_BUCKET)).get(access_key)).value
    assert stored is not None
    assert secret.encode() not in stored
    with pytest.raises(RuntimeError, match="another master key"):
        await SecretVault(bus, SecretVault.generate_key()).secret(access_key)
    rotated = SecretVault(bus, SecretVault.generate_key(), old_keys=(master,))
    assert await rotated.secret(access_key) == secret

    await vault.delete_secret(access_key)
    assert await vault.secret(access_key) is None
    assert await SecretVault(bus, master).secret(access_key) is None


async def test_a_sealed_secret_copied_under_another_access_key_is_refused(bus: Bus) -> None:
    master = SecretVault.generate_key()
    vault = SecretVault(bus, master)
    victim, other = new_access_key(), new_access_key()
    await vault.store_secret(victim, "victim-secret")
    kv = await bus.js.key_value(SECRETS_BUCKET)
    copied = (await kv.get(victim)).value
    assert copied is not None
    await kv.put(other, copied)

    with pytest.raises(RuntimeError, match="for another key"):
        await vault.secret(other)


async def test_access_keys_are_subject_safe_and_unique() -> None:
    keys = {new_access_key() for _ in range(200)}

    assert len(keys) == 200
    assert all(len(k) == 20 and k.startswith("AK") and k.isalnum() and k.isupper() for k in keys)


async def test_people_data_is_unreadable_once_the_person_is_forgotten(bus: Bus) -> None:
    master = SecretVault.generate_key()
    people, elsewhere = PeopleVault(bus, master), PeopleVault(bus, master)
    user_id = new_id()

    sealed = await people.seal(user_id, "ada@example.com")
    assert "ada" not in sealed
    assert await elsewhere.unseal(user_id, sealed) == "ada@example.com"
    assert await people.unseal(new_id(), sealed) is None

    await people.forget(user_id)
    assert await people.unseal(user_id, sealed) is None
    resealed = await people.seal(user_id, "ada@example.com")  # a new key, after forgetting
    assert await people.unseal(user_id, resealed) == "ada@example.com"
    assert await people.unseal(user_id, sealed) is None


async def test_a_gateway_with_another_master_key_reads_nobody_but_does_not_fail(
    bus: Bus,
) -> None:
    """A replica misconfigured with another master key: each person it cannot open is None
    (and logged), so a listing of many people still answers."""
    people = PeopleVault(bus, SecretVault.generate_key())
    misconfigured = PeopleVault(bus, SecretVault.generate_key())
    user_id = new_id()
    sealed = await people.seal(user_id, "grace@example.com")
    assert await misconfigured.unseal(user_id, sealed) is None
    assert await people.unseal(user_id, sealed) == "grace@example.com"


async def test_passwords_verify_and_are_rehashed_when_parameters_change(bus: Bus) -> None:
    cheap = PasswordStore(bus, CHEAP)
    user_id = new_id()
    await cheap.set_password(user_id, "correct horse")
    kv = await bus.js.key_value(CREDENTIALS_BUCKET)
    first = (await kv.get(user_id)).value
    assert first is not None
    assert b"correct horse" not in first

    assert await cheap.verify(user_id, "correct horse")
    assert not await cheap.verify(user_id, "wrong horse")
    assert not await cheap.verify(new_id(), "correct horse")
    assert (await kv.get(user_id)).value == first

    stronger = PasswordStore(bus, PasswordHasher(time_cost=2, memory_cost=2048, parallelism=1))
    assert await stronger.verify(user_id, "correct horse")
    rehashed = (await kv.get(user_id)).value
    assert rehashed is not None
    assert rehashed != first
    assert b"m=2048,t=2" in rehashed


# ---- nonces and logins ---------------------------------------------------------------------


async def test_a_nonce_is_claimed_once_per_access_key(bus: Bus) -> None:
    nonces, other_gateway = NonceStore(bus), NonceStore(bus)
    access_key, nonce = new_access_key(), "nonce-" + new_id()[:12]

    assert await nonces.claim(access_key, nonce)
    assert not await other_gateway.claim(access_key, nonce)
    assert await nonces.claim(new_access_key(), nonce)


async def test_login_tokens_resolve_until_expiry_or_revocation(bus: Bus) -> None:
    now = datetime.now(UTC)
    logins = LoginStore(bus, ttl_s=600, clock=lambda: now)
    user_id = new_id()

    token = await logins.issue(user_id)

    assert await logins.resolve(token) == user_id
    assert await logins.resolve(token + "x") is None
    kv = await bus.js.key_value(LOGINS_BUCKET)
    assert token not in await kv.keys()
    now += timedelta(seconds=601)
    assert await logins.resolve(token) is None

    now -= timedelta(seconds=601)
    assert await logins.resolve(token) == user_id
    await logins.revoke(token)
    assert await logins.resolve(token) is None
