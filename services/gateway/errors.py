"""How the gateway answers and logs what goes wrong: every GraphQL error carries a code.
Refused input (an error a resolver raised with a code, a validation error, an id argument that
is not an id, a cursor this gateway did not hand out) is logged as one line; NATS unreachable
is ``unavailable``; anything else is a bug: ``internal`` with an incident id, logged once with
its traceback, its text never shown to the client. A client that goes away (closes its
WebSocket or HTTP connection) is expected: one line at INFO (``is_disconnect``). Reads and
writes nothing.
"""

from __future__ import annotations

import asyncio
import logging

import nats.errors
import nats.js.errors
import websockets.exceptions
from graphql import GraphQLError
from starlette.requests import ClientDisconnect
from starlette.websockets import WebSocketDisconnect
from strawberry import Schema
from strawberry.extensions import MaskErrors
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.types import ExecutionContext
from uvicorn.protocols.utils import ClientDisconnected

from commands.bus import SendUnknownError
from events.writes import OutcomeUnknownError, UnavailableError
from projections.queries import InvalidCursorError
from schemas.ids import InvalidTokenError, new_id

log = logging.getLogger("services.gateway")

UNAVAILABLE = "unavailable"
UNAVAILABLE_MESSAGE = (
    "the cluster's event store (NATS) is unreachable or has no quorum: try again shortly"
)
UNREACHABLE = (
    nats.errors.Error,
    nats.js.errors.Error,
    TimeoutError,
    asyncio.TimeoutError,
    OSError,
    UnavailableError,
    OutcomeUnknownError,
)
"""What a lost or stalled NATS connection, or a log without a leader, raises."""


DISCONNECTS = (
    WebSocketDisconnected,
    WebSocketDisconnect,
    ClientDisconnect,
    ClientDisconnected,
    websockets.exceptions.ConnectionClosed,
)
"""What sending to, or reading from, a client that left raises (not a bare OSError: NATS
failing raises those too, and is ``unavailable``)."""


def is_disconnect(exc: BaseException) -> bool:
    """The client went away: expected, not a bug (ASGI servers also say so with a
    RuntimeError when a message is sent after the connection closed)."""
    if isinstance(exc, DISCONNECTS):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("close message" in text or "websocket.close" in text)


def code_of(error: GraphQLError) -> str | None:
    code = (error.extensions or {}).get("code")
    return str(code) if code is not None else None


def is_refusal(error: GraphQLError) -> bool:
    """An answer the API meant to give (coded, or GraphQL's own validation), not a bug."""
    original = error.original_error
    return code_of(error) is not None or original is None or isinstance(original, GraphQLError)


class ErrorCodes(MaskErrors):
    """Gives every uncoded error raised by a resolver a code: ``unavailable`` when NATS
    failed, else ``internal`` with an incident id (the text stays in the log)."""

    def __init__(self) -> None:
        super().__init__(should_mask_error=lambda error: not is_refusal(error))

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        original = error.original_error
        if isinstance(original, InvalidTokenError | InvalidCursorError):  # an id or a cursor
            log.info("refused (invalid): %s", original)
            message, extensions = str(original), {"code": "invalid"}
        elif isinstance(original, SendUnknownError):
            # Not "nothing happened": the command may be stored yet; say which, so the
            # client can send it again with the same id or look for its outcome.
            log.warning("answered unavailable (outcome unknown) at %s: %s", _path(error), original)
            message = f"{UNAVAILABLE_MESSAGE}; {original}"
            extensions = {"code": UNAVAILABLE, "commandId": original.command_id}
        elif isinstance(original, UNREACHABLE):
            log.warning("answered unavailable at %s: %r", _path(error), original)
            message, extensions = UNAVAILABLE_MESSAGE, {"code": UNAVAILABLE}
        else:
            incident = new_id()
            log.error("internal error %s at %s", incident, _path(error), exc_info=original or error)
            message = f"internal error {incident}: it is logged; please report it"
            extensions = {"code": "internal", "incident": incident}
        return GraphQLError(
            message,
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            extensions=extensions,
        )


class JetyardSchema(Schema):
    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        """Refusals are one line each; bugs are logged (with their traceback) by
        ``ErrorCodes`` together with the id the client is given."""
        for error in errors:
            if is_refusal(error):
                log.info("refused (%s): %s", code_of(error) or "invalid", error.message)


def _path(error: GraphQLError) -> str:
    return ".".join(str(part) for part in error.path or ()) or "-"
