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

import base64
import binascii
import hashlib
import hmac
import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.service_ports import NAME_PATTERN

VERSION = "a1"
MAX_TOKEN_CHARS = 2048
_SHAPE = re.compile(r"^a1\.([A-Za-z0-9_-]{1,1500})\.([A-Za-z0-9_-]{43})$")
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


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


def issue(key: bytes, claims: AppClaims) -> str:
    payload = _b64(claims.model_dump_json(exclude_defaults=True).encode())
    signed = f"{VERSION}.{payload}"
    return f"{signed}.{_b64(_signature(key, signed))}"


def verify(key: bytes, token: str, *, now: float, kind: TokenKind, max_ttl_s: float) -> AppClaims:
    """The claims of a well-signed, unexpired token of ``kind``; ``AppTokenError`` otherwise."""
    shape = _SHAPE.match(token) if len(token) <= MAX_TOKEN_CHARS else None
    if shape is None:
        raise AppTokenError("the app token is malformed")
    payload, signature = shape.groups()
    try:
        given = _unb64(signature)
    except binascii.Error:
        raise AppTokenError("the app token is malformed") from None
    if not hmac.compare_digest(given, _signature(key, f"{VERSION}.{payload}")):
        raise AppTokenError("the app token's signature does not match")
    try:
        claims = AppClaims.model_validate_json(_unb64(payload))
    except (ValidationError, binascii.Error):
        raise AppTokenError("the app token's claims cannot be read") from None
    if claims.kind is not kind:
        raise AppTokenError(f"a {claims.kind.value} token cannot be used as a {kind.value} token")
    if claims.exp <= now:
        raise AppTokenError("the app token has expired: open the app again (startApp)")
    if claims.exp > now + max_ttl_s:
        raise AppTokenError("the app token's expiry lies too far ahead")
    return claims
