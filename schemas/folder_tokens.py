"""Data-plane tokens: short-lived grants the API signs and the storage data plane checks.

A token is ``v1.<payload>.<signature>``: the payload is the compact JSON of ``Claims`` in
base64url (no padding), the signature HMAC-SHA256 of ``v1.<payload>`` under the shared key,
base64url too. A token grants one operation on one folder of one volume, on one path (or,
with ``prefix``, on every path beneath it), until ``exp`` (Unix seconds).

The format, the claims, issuing and verifying; the data plane's scope checks and its
register of one-use tokens are in ``services/storage/tokens.py``. Pure.
"""

from __future__ import annotations

import secrets
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.folder_paths import FolderPath, parse_path
from schemas.ids import Token
from schemas.sealed import SealError, seal, unseal

VERSION = "v1"
MAX_PAYLOAD_CHARS = 3000


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


def issue(key: bytes, claims: Claims) -> str:
    return seal(key, VERSION, claims)


def verify(key: bytes, token: str, *, now: float, max_ttl_s: float) -> Claims:
    """The claims of a well-signed, unexpired token; ``TokenError`` otherwise."""
    try:
        claims = unseal(key, VERSION, token, Claims, max_payload=MAX_PAYLOAD_CHARS)
    except SealError as exc:
        raise TokenError("token_invalid", 401, exc.said_of("token")) from None
    if claims.exp <= now:
        raise TokenError("token_expired", 401, "the token has expired: ask the API for a new one")
    if claims.exp > now + max_ttl_s:
        raise TokenError("token_invalid", 401, "the token's expiry lies too far ahead")
    return claims
