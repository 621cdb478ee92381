"""The gateway's HTTP edge, in front of GraphQL over HTTP and the other signed routes
(``Authenticated``): every request is authenticated before GraphQL sees it (a keypair
signature or a login token; none at all reaches only ``login`` and the GraphiQL page), rate
limited per keypair or user, and recorded in the access log with its outcome. A body that is
not a GraphQL request is a 400 saying why (``requests``), an operation its method cannot carry
(a subscription over HTTP, a mutation over GET) a ``wrong-transport`` error naming the one
that can; NATS unreachable is a 503 ``unavailable`` at once; a client that leaves is one INFO
line; no input makes a 500. Writes ``access.<domain>`` (``JY_ACCESS``) and the rate-limit
buckets (``jy-ratelimits``) through its services.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from commands.authorisation import Principal
from schemas.ids import new_id
from services.gateway.auth.authenticate import AuthError, signed_target
from services.gateway.auth.ratelimit import Limiter
from services.gateway.context import Services
from services.gateway.core.access_log import AccessRecord, now
from services.gateway.errors import UNAVAILABLE, UNAVAILABLE_MESSAGE, UNREACHABLE, is_disconnect
from services.gateway.requests import (
    MAX_BODY_BYTES,
    WRONG_TRANSPORT,
    BadRequestError,
    GraphQLRequest,
    anonymous_allowed,
    parse_body,
    request_of_query_string,
    wrong_transport,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

log = logging.getLogger(__name__)

PRINCIPAL_KEY = "jetyard.principal"
BEARER_KEY = "jetyard.bearer"


class Authenticated:
    """ASGI middleware in front of GraphQL over HTTP: authenticate, rate limit, log."""

    def __init__(self, app: ASGIApp, services: Services, limiter: Limiter) -> None:
        self.app = app
        self.services = services
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path = signed_target(scope)
        client = scope.get("client")
        source = f"{client[0]}:{client[1]}" if client else "-"
        operation = f"{scope['method']} {scope['path']} {_operation_of(body)}".rstrip()
        services = self.services
        request: GraphQLRequest | None = None
        if scope["method"] == "POST":
            try:
                request = parse_body(body)
            except BadRequestError as exc:
                log.info("refused %s from %s: %s", operation, source, exc)
                await problem(send, 400, "bad-request", str(exc), {})
                await record_access(services, None, source, operation, "refused: bad-request")
                return
        if not services.bus.nc.is_connected:
            # Said at once, not after a request's timeout: nothing here works without NATS.
            await problem(send, 503, UNAVAILABLE, UNAVAILABLE_MESSAGE, {"retry-after": "5"})
            log.warning("refused %s from %s: NATS is unreachable", operation, source)
            return
        principal: Principal | None = None
        if "authorization" in headers:
            try:
                principal = await services.authenticator.authenticate(
                    scope["method"], path, headers, body, headers.get("host", "")
                )
            except AuthError as exc:
                await problem(send, 401, exc.code, exc.message, {})
                await record_access(
                    services, None, source, operation, f"unauthenticated: {exc.code}"
                )
                return
            except UNREACHABLE as exc:
                log.warning("refused %s from %s: NATS failed (%r)", operation, source, exc)
                await problem(send, 503, UNAVAILABLE, UNAVAILABLE_MESSAGE, {"retry-after": "5"})
                return
        elif not _anonymous_may(scope, request):
            message = (
                "sign the request with a keypair, or send a login token "
                "(Authorization: Bearer ...): without credentials only `login` is answered"
            )
            await problem(send, 401, "unauthenticated", message, {})
            await record_access(services, None, source, operation, "unauthenticated: missing")
            return
        key = services.rate_key(principal, source)
        verdict = await self.limiter.take(key, services.rate_limit_of(principal))
        limit_headers = {k.lower(): v for k, v in verdict.headers().items()}
        if not verdict.allowed:
            message = (
                f"more than {verdict.limit} requests a minute: try again in {verdict.reset_s}s"
            )
            # Answered first, recorded after (as every request is): the record's round trip
            # to the stream is not the client's wait.
            await problem(send, 429, "rate-limited", message, limit_headers)
            await record_access(services, principal, source, operation, "denied: rate limit")
            return
        if scope["path"] == "/graphql":
            asked = (
                request
                if request is not None
                else request_of_query_string(scope.get("query_string", b""))
            )
            wrong = None if asked is None else wrong_transport(scope["method"], asked)
            if wrong is not None:
                http, message = wrong
                headers = {**limit_headers, **({"allow": "POST"} if http == 405 else {})}
                await problem(send, http, WRONG_TRANSPORT, message, headers)
                outcome = f"refused: {WRONG_TRANSPORT}"
                await record_access(services, principal, source, operation, outcome)
                return
        scope = dict(scope)
        scope[PRINCIPAL_KEY] = principal
        if principal is not None and headers.get("authorization", "").startswith("Bearer "):
            scope[BEARER_KEY] = headers["authorization"][len("Bearer ") :].strip()
        status: list[int] = []
        sent_body: list[bytes] = []

        replayed = False

        async def replay() -> Message:
            # The body once, then the client's own messages: a response that listens for
            # the client leaving hears ``http.disconnect``, not the body again and again.
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
                message = dict(message)
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.encode(), v.encode()) for k, v in limit_headers.items()),
                ]
            elif message["type"] == "http.response.body":
                sent_body.append(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, replay, send_with_limits)
        except Exception as exc:
            if is_disconnect(exc):  # expected: the client closed its connection
                log.info("%s from %s: the client left (%r)", operation, source, exc)
                await record_access(services, principal, source, operation, "client left")
                return
            if status:
                raise  # the answer has begun: nothing sensible can replace it
            code, message, http = _failure(exc, operation, source)
            await problem(send, http, code, message, limit_headers)
            status.append(http)
        outcome = _outcome_of(status[0] if status else 500, b"".join(sent_body))
        await record_access(services, principal, source, operation, outcome)


def _anonymous_may(scope: Scope, request: GraphQLRequest | None) -> bool:
    """Without credentials: the GraphiQL page (a GET with no query) and ``login``."""
    if scope["path"] != "/graphql":
        return False
    if scope["method"] == "GET":
        return b"query=" not in scope.get("query_string", b"")
    return request is not None and anonymous_allowed(request)


def _failure(exc: Exception, operation: str, source: str) -> tuple[str, str, int]:
    """The answer to a request that failed outside GraphQL's own error handling: NATS gone
    is ``unavailable`` (503); anything else is a bug, logged once with its id."""
    if isinstance(exc, UNREACHABLE):
        log.warning("%s from %s: NATS failed (%r)", operation, source, exc)
        return UNAVAILABLE, UNAVAILABLE_MESSAGE, 503
    incident = new_id()
    log.exception("internal error %s in %s from %s", incident, operation, source)
    return "internal", f"internal error {incident}: it is logged; please report it", 500


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _operation_of(body: bytes) -> str:
    """The GraphQL operation name, or the first field asked for, for the access log."""
    try:
        data = json.loads(body) if body and len(body) <= MAX_BODY_BYTES else {}
    except (ValueError, RecursionError):
        return ""
    if not isinstance(data, dict):
        return ""
    name = data.get("operationName")
    if isinstance(name, str) and name:
        return name
    query = data.get("query")
    if not isinstance(query, str):
        return ""
    words = query.replace("{", " { ").replace("(", " ( ").split()
    # "mutation { createSession (" / "{ sessions {" -> the first field after the first brace
    if "{" in words:
        rest = words[words.index("{") + 1 :]
        return rest[0] if rest else ""
    return ""


def _outcome_of(status: int, body: bytes) -> str:
    if status >= 400:
        return f"error: http {status}"
    try:
        errors = json.loads(body).get("errors") if body else None
    except (ValueError, AttributeError):
        errors = None
    if errors:
        codes = sorted({str((e.get("extensions") or {}).get("code", "error")) for e in errors})
        return f"refused: {', '.join(codes)}"
    return "ok"


async def record_access(
    services: Services, principal: Principal | None, source: str, operation: str, outcome: str
) -> None:
    await services.access.record(
        AccessRecord(
            at=now(),
            domain=principal.domain if principal else None,
            user_id=principal.user_id if principal else None,
            access_key=principal.access_key if principal else None,
            role=principal.role.value if principal else None,
            source=source,
            operation=operation[:256],
            outcome=outcome[:512],
        )
    )


async def problem(
    send: Send, status: int, code: str, message: str, headers: dict[str, str]
) -> None:
    body = json.dumps({"errors": [{"message": message, "extensions": {"code": code}}]}).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    raw_headers += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": body})
