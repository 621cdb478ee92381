"""App access tokens: short-lived grants the gateway signs (``startApp``) and the app proxy
checks, and the longer-lived cookie the proxy turns one into. Pure; no subjects.

A token is ``a1.<payload>.<signature>``: the payload is the compact JSON of ``AppClaims`` in
base64url (no padding), the signature HMAC-SHA256 of ``a1.<payload>`` under the key the
gateway and the proxy share, base64url too. A token names one app of one session, the person
it was issued to, whether that person administers the session's domain (the gateway decided),
its kind (``url``: in a ``startApp`` URL, minutes; ``cookie``: set by the proxy, hours) and its
expiry (Unix seconds). The proxy lets it through when its user owns the session or ``admin``
is set (``allows``).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from schemas.sealed import SealError, seal, unseal
from schemas.service_ports import NAME_PATTERN

VERSION = "a1"
MAX_PAYLOAD_CHARS = 1500
COOKIE = "jetyard_app"
"""The cookie's name; its ``Path`` (``/apps/<session>/<app>/``) keeps one per app."""


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
    exp: int

    def allows(self, owner: str | None) -> bool:
        """Whether this person may use the app of a session owned by ``owner``."""
        return self.admin or (owner is not None and self.user == owner)

    def as_cookie(self, exp: int) -> AppClaims:
        return self.model_copy(update={"kind": TokenKind.COOKIE, "exp": exp})


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
