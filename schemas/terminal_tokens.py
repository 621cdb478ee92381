"""Terminal tokens: the grant the app proxy signs, for one connection, to a kernel's terminal on
its agent (``services/node/terminal.py``), and the terminal's control message. Pure; no
subjects.

A token is ``t1.<payload>.<signature>``: the payload is the compact JSON of ``TerminalClaims``
(the kernel, the expiry in Unix seconds) in base64url (no padding), the signature
HMAC-SHA256 of ``t1.<payload>`` under the terminal key the proxy and the agents share. The
proxy makes a fresh one for each WebSocket it forwards, so a minute is plenty; an agent
refuses one whose expiry lies further ahead than ``MAX_TTL_S``. Without the key the agent's
endpoint is of no use: people reach a terminal only through the proxy, which checks them.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field

from schemas.sealed import SealError, seal, unseal

TERMINAL = "terminal"
"""The app name of every running session's terminal (``startApp(session, "terminal")``)."""
VERSION = "t1"
HEADER = "X-Jetyard-Terminal-Token"
"""The request header the proxy sends the token in (never in the URL: URLs end up in logs)."""
TTL_S = 60
MAX_TTL_S = 300
MAX_PAYLOAD_CHARS = 600


class TerminalClaims(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kernel: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    exp: int


class TerminalTokenError(Exception):
    """A token refused: malformed, forged, expired, or too long-lived."""


def issue(key: bytes, kernel_id: str, *, now: float, ttl_s: int = TTL_S) -> str:
    return seal(key, VERSION, TerminalClaims(kernel=kernel_id, exp=int(now) + ttl_s))


def verify(key: bytes, token: str, *, now: float) -> TerminalClaims:
    """The claims of a well-signed, unexpired token; ``TerminalTokenError`` otherwise."""
    try:
        claims = unseal(key, VERSION, token, TerminalClaims, max_payload=MAX_PAYLOAD_CHARS)
    except SealError as exc:
        raise TerminalTokenError(exc.said_of("terminal token")) from None
    if claims.exp <= now:
        raise TerminalTokenError("the terminal token has expired")
    if claims.exp > now + MAX_TTL_S:
        raise TerminalTokenError("the terminal token's expiry lies too far ahead")
    return claims


# ---- the terminal's messages -------------------------------------------------------------

MAX_SIZE = 1000
"""Columns and rows beyond this are refused (a typo, or someone probing)."""


def resize_of(text: str) -> tuple[int, int] | None:
    """``(cols, rows)`` when a text message is a resize (``{"resize": [cols, rows]}``); None
    when it is input to type."""
    if not text.startswith("{"):
        return None
    try:
        message = json.loads(text)
    except ValueError:
        return None
    size = message.get("resize") if isinstance(message, dict) and len(message) == 1 else None
    if not isinstance(size, list) or len(size) != 2:
        return None
    cols, rows = size
    if not all(type(n) is int and 0 < n <= MAX_SIZE for n in (cols, rows)):
        return None
    return cols, rows


def resize_message(cols: int, rows: int) -> str:
    return json.dumps({"resize": [cols, rows]})


def size_of(query_cols: str | None, query_rows: str | None) -> tuple[int, int] | None:
    """The size asked in ``?cols=&rows=``; None when absent or not sensible."""
    try:
        cols, rows = int(query_cols or ""), int(query_rows or "")
    except ValueError:
        return None
    return (cols, rows) if 0 < cols <= MAX_SIZE and 0 < rows <= MAX_SIZE else None
