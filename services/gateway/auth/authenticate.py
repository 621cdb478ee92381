"""Who sent this request: a keypair-signed request or a login token, resolved to a Principal;
and logging in with an email and password. Reads ``jy-secrets``, ``jy-logins``,
``jy-credentials`` (through the stores) and claims nonces in ``jy-nonces``.

A signed request is checked cheapest-first and claims its nonce last, so a request that fails
any check never uses up a nonce (a client may fix its clock or key and resend it).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from commands.authorisation import Principal
from schemas.principal import Actor, ActorKind
from schemas.signing import (
    DATE_HEADER,
    NONCE_HEADER,
    SigningError,
    check_nonce,
    parse_authorization,
    parse_date,
    sign,
)
from schemas.tenancy import email_digest, user_id_for
from services.gateway.auth.logins import LoginStore
from services.gateway.auth.nonces import NonceStore
from services.gateway.auth.vault import PasswordStore, SecretVault

BEARER = "bearer"


class KeypairRecord(Protocol):
    @property
    def active(self) -> bool: ...

    @property
    def user_id(self) -> str: ...


class UserRecord(Protocol):
    @property
    def id(self) -> str:
        """The user id (a user aggregate's id)."""


class Lookup(Protocol):
    """What authentication needs from the tenancy directory (folded from the log)."""

    @property
    def keypairs(self) -> Mapping[str, KeypairRecord]: ...

    def principal(self, actor: Actor) -> Principal | None:
        """The principal acting as ``actor``; None when unknown or deactivated."""

    def user_by_digest(self, digest: str) -> UserRecord | None: ...


class AuthError(Exception):
    """Authentication refused. ``code`` is stable (for clients); ``message`` says what to fix."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _now() -> datetime:
    return datetime.now(UTC)


class Authenticator:
    def __init__(
        self,
        vault: SecretVault,
        nonces: NonceStore,
        logins: LoginStore,
        passwords: PasswordStore,
        lookup: Lookup,
        window_s: float,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._vault = vault
        self._nonces = nonces
        self._logins = logins
        self._passwords = passwords
        self._lookup = lookup
        self._window = timedelta(seconds=window_s)
        self._clock = clock

    async def authenticate(
        self,
        method: str,
        path_with_query: str,
        headers: Mapping[str, str],
        body: bytes,
        host: str,
    ) -> Principal:
        """The principal of a signed or bearer-token request, else ``AuthError``."""
        lowered = {name.lower(): value for name, value in headers.items()}
        header = lowered.get("authorization", "").strip()
        if not header:
            raise AuthError(
                "missing-credentials",
                "no Authorization header: sign the request with a keypair or log in",
            )
        scheme, _, rest = header.partition(" ")
        if scheme.lower() == BEARER:
            return await self._bearer(rest.strip())
        return await self._signed(method, path_with_query, lowered, header, body, host)

    async def _signed(
        self,
        method: str,
        path_with_query: str,
        headers: Mapping[str, str],
        header: str,
        body: bytes,
        host: str,
    ) -> Principal:
        date_text = headers.get(DATE_HEADER.lower())
        nonce = headers.get(NONCE_HEADER.lower())
        try:
            access_key, signature = parse_authorization(header)
            if date_text is None:
                raise SigningError(f"a signed request needs the {DATE_HEADER} header")
            if nonce is None:
                raise SigningError(f"a signed request needs the {NONCE_HEADER} header")
            date = parse_date(date_text)
            check_nonce(nonce)
        except SigningError as exc:
            raise AuthError("malformed-authorization", str(exc)) from None

        now = self._clock()
        if abs(now - date) > self._window:
            window = int(self._window.total_seconds())
            raise AuthError(
                "stale-date",
                f"{DATE_HEADER} {date_text} is more than {window} s from the server time "
                f"{now.isoformat(timespec='seconds')}: check the client's clock",
            )

        keypair = self._lookup.keypairs.get(access_key)
        secret = await self._vault.secret(access_key) if keypair is not None else None
        if keypair is None or secret is None:
            raise AuthError("unknown-keypair", f"no keypair has the access key {access_key}")
        if not keypair.active:
            raise AuthError("keypair-inactive", f"keypair {access_key} is deactivated")
        principal = self._lookup.principal(Actor(kind=ActorKind.KEYPAIR, id=access_key))
        if principal is None:
            raise AuthError("keypair-inactive", f"the owner of keypair {access_key} is deactivated")

        content_type = headers.get("content-type", "")
        expected = sign(secret, method, path_with_query, date_text, host, content_type, nonce, body)
        if not secrets.compare_digest(expected, signature):
            raise AuthError(
                "bad-signature",
                "the signature does not match: check the secret key and the string to sign",
            )
        if not await self._nonces.claim(access_key, nonce):
            raise AuthError("replayed", f"this request was already received (nonce {nonce})")
        return principal

    async def _bearer(self, token: str) -> Principal:
        user_id = await self._logins.resolve(token) if token else None
        principal = (
            self._lookup.principal(Actor(kind=ActorKind.USER, id=user_id))
            if user_id is not None
            else None
        )
        if principal is None:
            raise AuthError("bad-token", "the login token is unknown or has expired: log in again")
        return principal

    async def login(self, email: str, password: str, email_key: bytes) -> str:
        """A login token for this email and password, else ``AuthError("bad-login")``.

        Every failure says the same thing and costs one password hash, so the answer tells
        nobody whether an email has an account.
        """
        digest = email_digest(email, email_key)
        user = self._lookup.user_by_digest(digest)
        user_id = user.id if user is not None else user_id_for(digest)
        verified = await self._passwords.verify(user_id, password)
        principal = self._lookup.principal(Actor(kind=ActorKind.USER, id=user_id))
        if user is None or not verified or principal is None:
            raise AuthError("bad-login", "wrong email or password")
        return await self._logins.issue(user_id)

    async def logout(self, token: str) -> None:
        await self._logins.revoke(token)


def signed_target(scope: Mapping[str, Any]) -> str:
    """The path and query of an ASGI request as the client signed them (the raw bytes sent,
    not the percent-decoded ``path``)."""
    raw = scope.get("raw_path") or scope["path"].encode()
    path = raw.decode("latin-1").split("?", 1)[0]
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path
