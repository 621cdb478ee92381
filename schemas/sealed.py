"""Sealed tokens: claims as compact JSON, signed with HMAC-SHA256, the one format the folder,
app and terminal tokens share. Pure; no subjects.

A token is ``<version>.<payload>.<signature>``: the payload is the claims' JSON (defaults left
out) in base64url without padding, the signature HMAC-SHA256 of ``<version>.<payload>`` under
the shared key, base64url too, compared in constant time. Each kind of token has its own
version tag (so one kind is never read as another), its own claims and its own rules on
expiry; ``unseal`` says only whether a token is well-formed, genuine and readable.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import re
from typing import Literal, TypeVar

from pydantic import BaseModel, ValidationError

C = TypeVar("C", bound=BaseModel)
SIGNATURE_CHARS = 43
"""A SHA-256 digest in base64url without padding."""


class SealError(Exception):
    """A token that cannot be trusted: ``malformed`` (not a token of this kind and size),
    ``forged`` (its signature does not match) or ``unreadable`` (genuine, but its claims are
    not valid claims)."""

    def __init__(self, reason: Literal["malformed", "forged", "unreadable"]) -> None:
        super().__init__(reason)
        self.reason = reason

    def said_of(self, token: str) -> str:
        """What is answered, naming the kind of token: ``the app token is malformed``."""
        return _SAID[self.reason].format(token=token)


_SAID = {
    "malformed": "the {token} is malformed",
    "forged": "the {token}'s signature does not match",
    "unreadable": "the {token}'s claims cannot be read",
}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


@functools.cache
def _shape(version: str, max_payload: int) -> re.Pattern[str]:
    return re.compile(
        rf"^{re.escape(version)}\.([A-Za-z0-9_-]{{1,{max_payload}}})"
        rf"\.([A-Za-z0-9_-]{{{SIGNATURE_CHARS}}})$"
    )


def seal(key: bytes, version: str, claims: BaseModel) -> str:
    signed = f"{version}.{_b64(claims.model_dump_json(exclude_defaults=True).encode())}"
    return f"{signed}.{_b64(_signature(key, signed))}"


def unseal(key: bytes, version: str, token: str, claims: type[C], *, max_payload: int) -> C:
    """The claims of a genuine token of ``version``; ``SealError`` otherwise. The length is
    checked before anything is decoded, so a huge token costs nothing."""
    too_long = len(token) > len(version) + max_payload + SIGNATURE_CHARS + 2
    shape = None if too_long else _shape(version, max_payload).match(token)
    if shape is None:
        raise SealError("malformed")
    payload, signature = shape.groups()
    try:
        given = _unb64(signature)
    except binascii.Error:
        raise SealError("malformed") from None
    if not hmac.compare_digest(given, _signature(key, f"{version}.{payload}")):
        raise SealError("forged")
    try:
        return claims.model_validate_json(_unb64(payload))
    except (ValidationError, ValueError, binascii.Error):
        raise SealError("unreadable") from None
