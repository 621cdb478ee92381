"""Request signing shared by the SDK and the gateway (Backend.AI's HMAC scheme, plus a nonce
and a signed body). Pure: header names, the string to sign, the derived key, the signature.

A signed request carries three headers::

    Authorization:   Jetyard signMethod=HMAC-SHA256, credential=<ACCESS_KEY>:<hex signature>
    X-Jetyard-Date:  2025-01-31T12:00:00+00:00      (ISO-8601 with a timezone)
    X-Jetyard-Nonce: <16 to 64 of A-Z a-z 0-9 _ ->   (fresh for every request)

The string to sign is these lines joined by ``\\n``: the method in upper case, the path with
its query exactly as sent, the date text as sent, ``host:<host>``, ``content-type:<content
type>`` (both lower-cased), ``x-jetyard-nonce:<nonce>``, the hex SHA-256 of the body.
The key is derived per day and per endpoint: ``k = HMAC(HMAC(secret, YYYYMMDD), host)`` where
``YYYYMMDD`` is the request date in UTC; the signature is ``hex(HMAC-SHA256(k, string))``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime

AUTHORIZATION_HEADER = "Authorization"
DATE_HEADER = "X-Jetyard-Date"
NONCE_HEADER = "X-Jetyard-Nonce"
SCHEME = "Jetyard"
SIGN_METHOD = "HMAC-SHA256"

NONCE_PATTERN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
# Access keys become KV keys (and subject tokens): the same character rule as ids.
_ACCESS_KEY = r"[A-Za-z0-9_-]{1,64}"
_AUTHORIZATION = re.compile(
    rf"^{SCHEME}\s+signMethod=(?P<method>[A-Za-z0-9-]+)\s*,\s*"
    rf"credential=(?P<access_key>{_ACCESS_KEY}):(?P<signature>[0-9a-fA-F]{{64}})\s*$",
    re.IGNORECASE,  # an HTTP auth scheme and its parameter names are case-insensitive
)


class SigningError(ValueError):
    """A signing header cannot be read; the message says which and what was expected."""


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def string_to_sign(
    method: str,
    path_with_query: str,
    date: str,
    host: str,
    content_type: str,
    nonce: str,
    body: bytes,
) -> str:
    return "\n".join(
        (
            method.upper(),
            path_with_query,
            date,
            f"host:{host.lower()}",
            f"content-type:{content_type.lower()}",
            f"x-jetyard-nonce:{nonce}",
            body_hash(body),
        )
    )


def parse_date(text: str) -> datetime:
    """The ``X-Jetyard-Date`` value as an aware datetime."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise SigningError(
            f"{DATE_HEADER} {text!r} is not an ISO-8601 date, e.g. 2025-01-31T12:00:00+00:00"
        ) from None
    if when.tzinfo is None:
        raise SigningError(f"{DATE_HEADER} {text!r} has no timezone: add one, e.g. +00:00 or Z")
    return when


def format_date(when: datetime) -> str:
    if when.tzinfo is None:
        raise SigningError("a signing date must be timezone-aware")
    return when.isoformat(timespec="seconds")


def check_nonce(nonce: str) -> str:
    if not NONCE_PATTERN.match(nonce):
        raise SigningError(
            f"{NONCE_HEADER} must be 16 to 64 characters of A-Z, a-z, 0-9, '_' or '-'"
        )
    return nonce


def new_nonce() -> str:
    return secrets.token_urlsafe(24)  # 32 characters, 192 random bits


def derive_key(secret_key: str, date: datetime, host: str) -> bytes:
    """Per-day, per-endpoint key: a leaked derived key is good for one host on one day."""
    day = date.astimezone(UTC).strftime("%Y%m%d")
    k_date = hmac.new(secret_key.encode(), day.encode(), hashlib.sha256).digest()
    return hmac.new(k_date, host.lower().encode(), hashlib.sha256).digest()


def sign(
    secret_key: str,
    method: str,
    path_with_query: str,
    date: str,
    host: str,
    content_type: str,
    nonce: str,
    body: bytes,
) -> str:
    """The hex signature of one request; ``date`` is the header text (its UTC day keys it)."""
    key = derive_key(secret_key, parse_date(date), host)
    text = string_to_sign(method, path_with_query, date, host, content_type, nonce, body)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def authorization(access_key: str, signature: str) -> str:
    return f"{SCHEME} signMethod={SIGN_METHOD}, credential={access_key}:{signature}"


def parse_authorization(header: str) -> tuple[str, str]:
    """``(access_key, signature)`` from an ``Authorization`` header value."""
    match = _AUTHORIZATION.match(header.strip())
    if match is None:
        raise SigningError(
            "the Authorization header must read "
            f"'{SCHEME} signMethod={SIGN_METHOD}, credential=<access key>:<64 hex digits>'"
        )
    if match["method"].upper() != SIGN_METHOD:
        raise SigningError(f"signMethod {match['method']!r} is not supported: use {SIGN_METHOD}")
    return match["access_key"], match["signature"].lower()


def signed_headers(
    access_key: str,
    secret_key: str,
    method: str,
    path_with_query: str,
    host: str,
    content_type: str,
    body: bytes,
    now: datetime,
    nonce: str | None = None,
) -> dict[str, str]:
    """The three headers that sign one request made at ``now``."""
    date = format_date(now)
    nonce = check_nonce(nonce if nonce is not None else new_nonce())
    signature = sign(secret_key, method, path_with_query, date, host, content_type, nonce, body)
    return {
        AUTHORIZATION_HEADER: authorization(access_key, signature),
        DATE_HEADER: date,
        NONCE_HEADER: nonce,
    }
