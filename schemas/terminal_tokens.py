"""Terminal tokens: the grant the app proxy signs, for one connection, to a kernel's terminal on
its agent (``services/node/terminal.py``), and the terminal's control message. Pure; no
subjects.

A token is ``t1.<payload>.<signature>``: the payload is the compact JSON of ``TerminalClaims``
(the kernel, the expiry in Unix seconds, a random nonce) in base64url (no padding), the
signature HMAC-SHA256 of ``t1.<payload>`` under the terminal key the proxy and the agents
share. The proxy makes a fresh one for each WebSocket it forwards and sends it at once, so
``TTL_S`` is short (clock skew between proxy and agent is what it covers); an agent refuses
one whose expiry lies further ahead than ``MAX_TTL_S``, and accepts each token once
(``UsedTokens``: a token seen on the wire cannot open a second terminal). Without the key
the agent's endpoint is of no use: people reach a terminal only through the proxy, which
checks them.

The terminal's messages come after: with a TTY (the default), a resize; without one
(``?tty=0``: a command, its exit code), the exec protocol.
"""

from __future__ import annotations

import heapq
import json
import secrets
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from schemas.sealed import SealError, seal, unseal

TERMINAL = "terminal"
"""The app name of every running session's terminal (``startApp(session, "terminal")``)."""
VERSION = "t1"
HEADER = "X-Jetyard-Terminal-Token"
"""The request header the proxy sends the token in (never in the URL: URLs end up in logs)."""
TTL_S = 15
MAX_TTL_S = 60
MAX_PAYLOAD_CHARS = 600
MAX_REMEMBERED = 100_000
"""Tokens an agent remembers as used (each until its expiry): at most ``MAX_TTL_S`` worth of
terminals opened, far more than a node's users open; past it new ones are refused."""


class TerminalClaims(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kernel: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    exp: int
    nonce: str = Field(pattern=r"^[A-Za-z0-9_-]{16,64}$")
    """Random: what makes each token one of its kind, so it can be accepted once."""


class TerminalTokenError(Exception):
    """A token refused: malformed, forged, expired, too long-lived, or used already."""


def issue(key: bytes, kernel_id: str, *, now: float, ttl_s: int = TTL_S) -> str:
    claims = TerminalClaims(kernel=kernel_id, exp=int(now) + ttl_s, nonce=secrets.token_urlsafe(18))
    return seal(key, VERSION, claims)


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


@dataclass
class UsedTokens:
    """The nonces of the tokens an agent accepted, each kept until its token expires (after
    that ``verify`` refuses the token anyway): a token is accepted once."""

    limit: int = MAX_REMEMBERED
    _expiring: list[tuple[int, str]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def spend(self, claims: TerminalClaims, *, now: float) -> None:
        """Accept the token of these (verified) claims, once; ``TerminalTokenError`` when it
        was used already, or when too many unexpired ones are remembered."""
        while self._expiring and self._expiring[0][0] <= now:
            self._seen.discard(heapq.heappop(self._expiring)[1])
        if claims.nonce in self._seen:
            raise TerminalTokenError("the terminal token was used already")
        if len(self._seen) >= self.limit:
            raise TerminalTokenError("too many terminals opened here lately; try again soon")
        self._seen.add(claims.nonce)
        heapq.heappush(self._expiring, (claims.exp, claims.nonce))

    def __len__(self) -> int:
        return len(self._seen)


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


# ---- without a TTY (``?tty=0``): one command, its output apart, its exit code ------------
# The client's first frame is the command (``exec_message``; an empty one: the shell, reading
# stdin); then binary frames are its stdin, and ``EOF_MESSAGE`` closes it. The agent sends
# its output as binary frames whose first byte says the stream (``STDOUT``, ``STDERR``), and
# last a text frame ``{"exit": code}`` (or ``{"error": sentence}`` when it could not run).

NO_TTY = "0"
"""The value of ``?tty=`` that asks for no TTY (the proxy passes ``tty`` on, like the size)."""
STDOUT, STDERR = 1, 2
MAX_EXEC_CHARS = 128 * 1024
"""The command's JSON, at most (bounds what an agent parses before anything runs)."""
MAX_EXEC_WORDS = 1024
EOF_MESSAGE = '{"eof": true}'


class ExecError(ValueError):
    """A command frame refused; the message says why."""


def exec_message(argv: list[str]) -> str:
    """The first frame of a terminal without a TTY: run ``argv`` (``[]``: the shell)."""
    text = json.dumps({"exec": argv})
    exec_of(text)  # refused here, at the client, before anything is sent
    return text


def exec_of(text: str) -> list[str]:
    """The command of a first frame; ``ExecError`` when it is not one."""
    if len(text) > MAX_EXEC_CHARS:
        raise ExecError(f"the command is {len(text)} characters of JSON, at most {MAX_EXEC_CHARS}")
    try:
        message = json.loads(text)
    except ValueError:
        raise ExecError('the first frame must be {"exec": [word, ...]}') from None
    argv = message.get("exec") if isinstance(message, dict) and len(message) == 1 else None
    if not isinstance(argv, list) or not all(isinstance(w, str) for w in argv):
        raise ExecError('the first frame must be {"exec": [word, ...]}')
    if len(argv) > MAX_EXEC_WORDS:
        raise ExecError(f"the command has {len(argv)} words, at most {MAX_EXEC_WORDS}")
    if any("\0" in w for w in argv):
        raise ExecError("a word of the command holds a NUL character")
    return argv


def output_frame(stream: int, data: bytes) -> bytes:
    return bytes((stream,)) + data


def output_of(frame: bytes) -> tuple[int, bytes]:
    """``(STDOUT or STDERR, data)`` of an output frame."""
    stream = frame[0] if frame else 0
    if stream not in (STDOUT, STDERR):
        raise ExecError(f"an output frame must start with {STDOUT} or {STDERR}, not {stream}")
    return stream, frame[1:]


def exit_message(code: int) -> str:
    return json.dumps({"exit": code})


def error_message(sentence: str) -> str:
    return json.dumps({"error": sentence})


@dataclass(frozen=True)
class Ended:
    """The last frame without a TTY: the command's exit code, or why it did not run."""

    exit_code: int | None = None
    error: str | None = None


def ended_of(text: str) -> Ended | None:
    """The end a text frame says; None when it says none."""
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if not isinstance(message, dict) or len(message) != 1:
        return None
    code, error = message.get("exit"), message.get("error")
    if type(code) is int:
        return Ended(exit_code=code)
    if isinstance(error, str):
        return Ended(error=error)
    return None
