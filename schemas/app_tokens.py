"""App access tokens: short-lived grants the gateway signs (``startApp``) and the app proxy
checks, and the longer-lived cookie the proxy turns one into. Pure; no subjects.

A token is ``a1.<payload>.<signature>``: the payload is the compact JSON of ``AppClaims`` in
base64url (no padding), the signature HMAC-SHA256 of ``a1.<payload>`` under the key the
gateway and the proxy share, base64url too. A token names one app of one session, the person
it was issued to, whether that person administers the session's domain (the gateway decided),
its kind (``url``: in a ``startApp`` URL, seconds; ``cookie``: set by the proxy, hours), when it
was issued and its expiry (Unix seconds), and the grant it belongs to: a random id the proxy
claims in ``GRANTS_BUCKET`` the first time the URL is used, so that no URL works twice (across
replicas and restarts). The proxy lets it through when its user owns the session or ``admin``
is set (``allows``), and when its owner has not revoked access since it was issued
(``revoked_key``).
"""

from __future__ import annotations

import secrets
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from schemas.sealed import SealError, seal, unseal
from schemas.service_ports import NAME_PATTERN

VERSION = "a1"
MAX_PAYLOAD_CHARS = 1500
COOKIE = "jetyard_app"
"""The cookie's name; its ``Path`` (``/apps/<session>/<app>/``) keeps one per app."""
GRANT_PATTERN = r"^[A-Za-z0-9_-]{16,64}$"
GRANTS_TTL_S = 24 * 3600 + 60
"""How long ``GRANTS_BUCKET`` keeps a claimed URL or a revocation: longer than any cookie
(``MAX_COOKIE_TTL_S``), so a revocation outlives every grant it voids."""
MAX_COOKIE_TTL_S = 24 * 3600
ALL_APPS = "_all"
"""The app part of a revocation key that voids every app of the session (``revoked_key``);
no app can be named so (an app's name starts with a letter or a digit)."""


class TokenKind(StrEnum):
    URL = "url"
    COOKIE = "cookie"


class AppClaims(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    session: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    app: str = Field(pattern=NAME_PATTERN)
    user: str = Field(min_length=1, max_length=128)
    admin: bool = False
    """The user administers the session's domain (or is a superadmin): any owner will do."""
    kind: TokenKind = TokenKind.URL
    grant: str = Field(pattern=GRANT_PATTERN)
    """The ``startApp`` call this came from: its URL token is claimed once under this id."""
    iat: float
    """Issued at (Unix seconds): a revocation voids what was issued at or before it."""
    exp: int

    def allows(self, owner: str | None) -> bool:
        """Whether this person may use the app of a session owned by ``owner``."""
        return self.admin or (owner is not None and self.user == owner)

    def as_cookie(self, now: float, exp: int) -> AppClaims:
        return self.model_copy(update={"kind": TokenKind.COOKIE, "iat": now, "exp": exp})


def new_grant() -> str:
    return secrets.token_urlsafe(18)


def claimed_key(grant: str) -> str:
    """The ``GRANTS_BUCKET`` key a URL token's first use creates."""
    return f"url.{grant}"


REVOKED_PREFIX = "revoked."


def revoked_key(session_id: str, app: str | None) -> str:
    """The ``GRANTS_BUCKET`` key of a revocation (its value: the time, Unix seconds, at or
    before which every grant of that app, or of every app when ``app`` is None, is void)."""
    return f"{REVOKED_PREFIX}{session_id}.{app or ALL_APPS}"


def revocation_of(key: str) -> tuple[str, str | None] | None:
    """``(session, app or None for all)`` of a revocation key; None for any other key."""
    if not key.startswith(REVOKED_PREFIX):
        return None
    session_id, _, app = key[len(REVOKED_PREFIX) :].partition(".")
    if not session_id or not app:
        return None
    return session_id, None if app == ALL_APPS else app


class AppTokenError(Exception):
    """A token refused (always 401: the caller has to ask ``startApp`` again)."""


def issue(key: bytes, claims: AppClaims) -> str:
    return seal(key, VERSION, claims)


def verify(key: bytes, token: str, *, now: float, kind: TokenKind, max_ttl_s: float) -> AppClaims:
    """The claims of a well-signed, unexpired token of ``kind``; ``AppTokenError`` otherwise."""
    try:
        claims = unseal(key, VERSION, token, AppClaims, max_payload=MAX_PAYLOAD_CHARS)
    except SealError as exc:
        raise AppTokenError(exc.said_of("app token")) from None
    if claims.kind is not kind:
        raise AppTokenError(f"a {claims.kind.value} token cannot be used as a {kind.value} token")
    if claims.exp <= now:
        raise AppTokenError("the app token has expired: open the app again (startApp)")
    if claims.exp > now + max_ttl_s:
        raise AppTokenError("the app token's expiry lies too far ahead")
    return claims
