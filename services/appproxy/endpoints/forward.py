"""Plain HTTP to a model-serving endpoint, as a bare ASGI handler: ``/e/<name>/<path>`` (and
``/e/<name>`` as ``/``) relayed to one of its serving replicas (``relay.py``) with
``/e/<name>`` stripped (``X-Forwarded-Prefix`` says it) and without ``Authorization``: the
endpoint's token never reaches a replica. The query passes whole.

The endpoint from the table (``table.py``), the token (``access.py``), then a replica by least
outstanding requests (``balance.py``). A connection a replica refuses (or that times out before
anything was sent) is tried once more on another replica. With no replica serving, the request
is held until one serves or the endpoint's ``cold_start_timeout_s`` passes, and an endpoint
scaled to zero is woken (``wake.py``). Answers stream through as they come (server-sent
events, chunked).

Answers of the proxy's own: 404 no endpoint of that name; 410 being destroyed or destroyed;
401 from ``access.check``; 503 no replica served in time; 502 no replica could be reached, or
the one reached broke off before its answer's head. No subjects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from starlette.types import Message, Receive, Scope, Send

from schemas.serving import INFERENCE_APP
from services.appproxy.access import Refused
from services.appproxy.endpoints import access
from services.appproxy.endpoints.table import Endpoint
from services.appproxy.metrics import EndpointMetrics, ProxyMetrics
from services.appproxy.relay import Relay, address_key, plain, request_head, small_body
from services.appproxy.service import AppProxyService
from services.appproxy.upstream import ConnectFailed, Exchange, UpstreamError

log = logging.getLogger(__name__)

PREFIX = "/e/"
DROP = frozenset({b"authorization"})
ATTEMPTS = 2
"""A request is sent to at most this many replicas (only when a connection is refused)."""


def endpoint_name(path: str) -> str | None:
    """The name in ``/e/<name>`` or ``/e/<name>/…``; None for any other path."""
    if not path.startswith(PREFIX):
        return None
    return path[len(PREFIX) :].split("/", 1)[0] or None


@dataclass(frozen=True, slots=True)
class Pick:
    replica: int
    address: str


@dataclass(frozen=True, slots=True)
class Answer:
    """The proxy answers itself."""

    status: int
    text: str


class EndpointForwarder:
    """One per listener, next to the app ``Forwarder`` (sharing its relay and counters)."""

    def __init__(
        self, service: AppProxyService, relay: Relay, counted: ProxyMetrics,
        metrics: EndpointMetrics,
    ) -> None:  # fmt: skip
        self._routes = service.table
        self._balancer = service.balancer
        self._waker = service.waker
        self._changes = service.fold.changes
        self._relay = relay
        self._counted = counted
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send, name: str) -> None:
        send, receive = self._counted.sending(send), self._counted.receiving(receive)
        endpoint = self._routes.endpoints.named(name)
        if endpoint is None:
            await plain(send, 404, f"no endpoint named {name!r}")
            return
        started, status = time.perf_counter(), 0

        async def answering(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._admitted(scope, receive, answering, endpoint)
        finally:
            if status:  # else the client went before any answer
                self._metrics.answered(name, status, time.perf_counter() - started)

    async def _admitted(
        self, scope: Scope, receive: Receive, send: Send, endpoint: Endpoint
    ) -> None:
        if endpoint.gone:
            await plain(send, 410, _gone(endpoint))
            return
        authorization = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        try:
            access.check(endpoint, authorization, now=time.time())
        except Refused as refused:
            await plain(send, refused.status, refused.message, access.CHALLENGE)
            return
        arrived = time.perf_counter()
        with self._balancer.arrived(endpoint.id):
            await self._serve(scope, receive, send, endpoint)
        self._balancer.answered(endpoint.id, (time.perf_counter() - arrived) * 1000)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, endpoint: Endpoint) -> None:
        head_only = scope["method"] == "HEAD"
        prefix, query = PREFIX + endpoint.name, scope.get("query_string", b"").decode("latin-1")
        tried: set[int] = set()
        try:
            whole = await small_body(scope, receive)
        except UpstreamError:
            return  # the client went away before its request was all there
        for _ in range(ATTEMPTS):
            picked = await self._pick(endpoint.id, frozenset(tried))
            if isinstance(picked, Answer):
                await plain(send, picked.status, picked.text)
                return
            request, body = request_head(scope, picked.address, prefix, query, DROP, whole)
            with self._balancer.sent(endpoint.id, picked.replica):
                try:
                    exchange = await self._relay.exchange(
                        address_key(picked.address), request, body, receive, head_only
                    )
                except ConnectFailed as exc:
                    log.info("appproxy: replica %d of endpoint %s: %s", picked.replica,
                             endpoint.name, exc)  # fmt: skip
                    now = asyncio.get_running_loop().time()
                    self._balancer.unreachable(endpoint.id, picked.replica, now=now)
                    tried.add(picked.replica)
                    continue
                except UpstreamError as exc:
                    log.info("appproxy: replica %d of endpoint %s did not take the request: "
                             "%s", picked.replica, endpoint.name, exc)  # fmt: skip
                    await plain(send, 502, f"replica {picked.replica} of endpoint "
                                f"{endpoint.name} does not answer")  # fmt: skip
                    return
                await self._answer(exchange, send, receive, head_only, endpoint, picked)
                return
        await plain(send, 502, f"no replica of endpoint {endpoint.name} could be reached")

    async def _pick(self, endpoint_id: str, tried: frozenset[int]) -> Pick | Answer:
        """A serving replica not tried yet; before the first try, held until one serves."""
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while True:
            endpoint = self._routes.endpoints.by_id.get(endpoint_id)
            if endpoint is None or endpoint.gone:
                return Answer(410, _gone(endpoint))
            serving = self._serving(endpoint)
            now = loop.time()
            if serving:
                self._waker.served(endpoint_id)
                number = self._balancer.choose(endpoint_id, list(serving), now=now, tried=tried)
                if number is not None:
                    return Pick(number, serving[number])
            if tried:  # a retry is never held: the request has waited once already
                return Answer(502, f"no replica of endpoint {endpoint.name} could be reached")
            if deadline is None:
                deadline = now + endpoint.cold_start_timeout_s
            if endpoint.desired == 0:
                self._waker.wake(endpoint, now)
            if now >= deadline:
                return Answer(503, _unserved(endpoint))
            await self._changes.wait(deadline - now)

    def _serving(self, endpoint: Endpoint) -> dict[int, str]:
        """Serving replica number -> its address, for those whose address is known."""
        found = {}
        for replica in endpoint.serving():
            address = self._routes.address(replica.session_id, INFERENCE_APP)
            if address is not None:
                found[replica.number] = address
        return found

    async def _answer(
        self, exchange: Exchange, send: Send, receive: Receive, head_only: bool,
        endpoint: Endpoint, picked: Pick,
    ) -> None:  # fmt: skip
        try:
            head = await exchange.head()
        except UpstreamError as exc:
            exchange.abort()
            log.info("appproxy: replica %d of endpoint %s did not answer: %s", picked.replica,
                     endpoint.name, exc)  # fmt: skip
            await plain(send, 502, f"replica {picked.replica} of endpoint {endpoint.name} "
                        "does not answer")  # fmt: skip
            return
        try:
            if not await self._relay.answer(exchange, head, send, receive, head_only):
                await plain(send, 502, f"replica {picked.replica} of endpoint "
                            f"{endpoint.name} broke off")  # fmt: skip
        finally:
            self._relay.pool.release(exchange)


def _gone(endpoint: Endpoint | None) -> str:
    if endpoint is None:
        return "this endpoint is gone"
    if endpoint.destroyed:
        return f"endpoint {endpoint.name} was destroyed"
    return f"endpoint {endpoint.name} is being destroyed"


def _unserved(endpoint: Endpoint) -> str:
    waited = f"{endpoint.cold_start_timeout_s:g} s"
    if endpoint.desired == 0:
        return (f"endpoint {endpoint.name} is scaled to zero: it was woken, and no replica "
                f"served within its cold start timeout ({waited}); try again")  # fmt: skip
    return (f"endpoint {endpoint.name} has no replica serving: none became ready within its "
            f"cold start timeout ({waited})")  # fmt: skip
