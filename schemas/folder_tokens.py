"""Data-plane tokens: short-lived grants the API signs and the storage data plane checks.

A token is ``v1.<payload>.<signature>``: the payload is the compact JSON of ``Claims`` in
base64url (no padding), the signature HMAC-SHA256 of ``v1.<payload>`` under the shared key,
base64url too. A token grants one operation on one folder of one volume, on one path (or,
with ``prefix``, on every path beneath it), until ``exp`` (Unix seconds).

The format, the claims, issuing and verifying; the data plane's scope checks and its
register of one-use tokens are in ``services/storage/tokens.py``. Pure.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from schemas.folder_paths import FolderPath, UnsafePath, parse_path
from schemas.ids import Token

VERSION = "v1"
MAX_TOKEN_CHARS = 4096
_SHAPE = re.compile(r"^v1\.([A-Za-z0-9_-]{1,3000})\.([A-Za-z0-9_-]{43})$")


class Operation(StrEnum):
    UPLOAD = "upload"
    DOWNLOAD = "download"
    LIST = "list"
    MKDIR = "mkdir"
    MOVE = "move"
    DELETE = "delete"
    ARCHIVE = "archive"


class Claims(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Operation
    volume: Token
    folder: Token
    path: str = ""
    prefix: bool = False
    max_bytes: int | None = Field(default=None, ge=0)
    exp: int
    jti: str = Field(
        default_factory=lambda: secrets.token_urlsafe(12), pattern=r"^[A-Za-z0-9_-]{8,64}$"
    )
    once: bool = False

    @field_validator("path")
    @classmethod
    def _path_is_safe(cls, value: str) -> str:
        parse_path(value)
        return value

    @property
    def folder_path(self) -> FolderPath:
        return parse_path(self.path)

    def allows(self, path: FolderPath) -> bool:
        granted = self.folder_path
        return path.is_within(granted) if self.prefix else path == granted


class TokenError(Exception):
    """A token refused; ``code`` and ``status`` become the HTTP error."""

    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


def issue(key: bytes, claims: Claims) -> str:
    payload = _b64(claims.model_dump_json(exclude_defaults=True).encode())
    signed = f"{VERSION}.{payload}"
    return f"{signed}.{_b64(_signature(key, signed))}"


def verify(key: bytes, token: str, *, now: float, max_ttl_s: float) -> Claims:
    """The claims of a well-signed, unexpired token; ``TokenError`` otherwise."""
    shape = _SHAPE.match(token) if len(token) <= MAX_TOKEN_CHARS else None
    if shape is None:
        raise TokenError("token_invalid", 401, "the token is malformed")
    payload, signature = shape.groups()
    try:
        given = _unb64(signature)
    except binascii.Error:
        raise TokenError("token_invalid", 401, "the token is malformed") from None
    if not hmac.compare_digest(given, _signature(key, f"{VERSION}.{payload}")):
        raise TokenError("token_invalid", 401, "the token's signature does not match")
    try:
        claims = Claims.model_validate_json(_unb64(payload))
    except (ValidationError, binascii.Error, UnsafePath):
        raise TokenError("token_invalid", 401, "the token's claims cannot be read") from None
    if claims.exp <= now:
        raise TokenError("token_expired", 401, "the token has expired: ask the API for a new one")
    if claims.exp > now + max_ttl_s:
        raise TokenError("token_invalid", 401, "the token's expiry lies too far ahead")
    return claims
