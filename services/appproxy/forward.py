"""Plain HTTP to a session's app through the proxy, as a bare ASGI handler: the route, who may
pass (``access.py``), then the request relayed to the app (``relay.py``) and its answer passed
back — whole when it says it is small, streamed otherwise. WebSockets, the redirect to the
trailing slash and ``/healthz`` stay with ``http.py``'s Starlette app.

The request reaches the app as ``headers.py`` says (as a WebSocket's does): with
``/apps/<session>/<app>`` stripped (``X-Forwarded-Prefix`` says it), without hop-by-hop
headers, the proxy's cookie or its ``token`` parameter, and with ``X-Forwarded-For``/``-Host``/
``-Proto`` set by the proxy alone (a client's own are dropped).

Answers: 404 for no such app of a running session, 410 for a session that ended, 401/403 from
``access.check``, 502 when the app does not answer or breaks off before its answer's head.
No subjects.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import Receive, Scope, Send

from schemas import terminal_tokens
from schemas.app_tokens import COOKIE
from services.appproxy import access, headers
from services.appproxy.grants import GrantsUnavailable
from services.appproxy.metrics import proxy_metrics
from services.appproxy.relay import Relay, address_key, plain, request_head, small_body
from services.appproxy.routes import Route
from services.appproxy.service import AppProxyService
from services.appproxy.upstream import Exchange, UpstreamError

log = logging.getLogger(__name__)

APPS = "/apps/"


def app_path(path: str) -> tuple[str, str] | None:
    """``(session, app)`` of a path ``/apps/<session>/<app>/…``; None for any other path
    (``/apps/<s>/<a>`` without the slash included: that one is redirected)."""
    if not path.startswith(APPS):
        return None
    parts = path.split("/", 4)
    if len(parts) < 5 or not parts[2] or not parts[3]:
        return None
    return parts[2], parts[3]


@dataclass(frozen=True, slots=True)
class Mount:
    """Where a route is served: under its prefix on the main listener (path mode) or at the
    root of a port of its own (port mode), and the cookie that carries its grant there."""

    prefix: str
    """``/apps/<session>/<app>``, or empty at a port of its own."""
    cookie: str
    cookie_path: str

    @staticmethod
    def at_path(session_id: str, app: str) -> Mount:
        prefix = access.prefix(session_id, app)
        return Mount(prefix, COOKIE, prefix + "/")

    @staticmethod
    def at_port(port: int) -> Mount:
        # Cookies are kept per host, not per port: the port in the name keeps them apart.
        return Mount("", f"{COOKIE}_{port}", "/")


Resolved = tuple[Route, Mount] | tuple[int, str]
"""A route and where it is served, or the status and text of why there is none."""


class Forwarder:
    """One per listener: the route table and settings of the service, the listener's relay
    (its pool of upstream connections), port mode's range."""

    def __init__(self, service: AppProxyService, relay: Relay) -> None:
        self.service = service
        self.relay = relay
        settings = service.settings
        self.ports = settings.app_port_range()
        self._key = settings.token_key.get_secret_value().encode()
        self._cookies = access.CookieCache()
        public = urlsplit(settings.public_url)
        self._secure = public.scheme == "https"
        self._public_host = public.hostname or "127.0.0.1"
        self.metrics, self.counted = proxy_metrics(service)
        """``/metrics`` (``http.py``), and the counters every request goes through."""

    def at_path(self, session_id: str, app: str) -> Resolved:
        table = self.service.table
        route = table.route(session_id, app)
        if route is not None:
            return route, Mount.at_path(session_id, app)
        if session_id in table.ended:
            return 410, f"session {session_id} has ended"
        return 404, f"no app {app!r} in a running session {session_id}"

    def at_port(self, port: int) -> Resolved:
        held = self.service.table.at_slot(port - self.ports.start) if self.ports else None
        route = self.service.table.route(*held) if held is not None else None
        if route is None:
            return 404, f"no app at port {port} now (open the app again: startApp)"
        return route, Mount.at_port(port)

    def port_of(self, route: Route) -> int | None:
        """The route's own port in port mode, if it has one in the range."""
        slot = self.service.table.slots.get((route.session_id, route.app))
        if self.ports is None or slot is None or slot >= len(self.ports):
            return None
        return self.ports[slot]

    async def __call__(self, scope: Scope, receive: Receive, send: Send, found: Resolved) -> None:
        send, receive = self.counted.sending(send), self.counted.receiving(receive)
        if isinstance(found[0], int):
            await plain(send, found[0], str(found[1]))
            return
        route, mount = found
        assert isinstance(route, Route) and isinstance(mount, Mount)
        query = scope.get("query_string", b"").decode("latin-1")
        if mount.prefix and route.app != terminal_tokens.TERMINAL:
            port = self.port_of(route)
            if port is not None:
                await self._to_port(send, scope, port, mount, query)
                return
        token = access.token_of(query) if "token=" in query else None
        try:
            allowed = await self.admit(route, mount, scope, token)
        except access.Refused as refused:
            await plain(send, refused.status, refused.message)
            return
        if allowed.cookie is not None:
            await self._set_cookie(send, scope, mount, allowed.cookie)
            return
        if route.app == terminal_tokens.TERMINAL:
            await plain(send, 400, "the terminal is a WebSocket (jetyard shell)")
            return
        self.service.traffic(route.session_id, route.app)
        await self._forward(scope, receive, send, route, mount, query if token is None else None)

    async def admit(
        self, route: Route, mount: Mount, scope: Scope, token: str | None
    ) -> access.Allowed:
        """``access.check``, then a URL token claimed: it passes here once, never again."""
        settings, grants = self.service.settings, self.service.grants
        allowed = access.check(
            route, self._key, token=token, cookie=_cookie(scope, mount.cookie), now=time.time(),
            max_url_ttl_s=settings.max_url_token_ttl_s, cookie_ttl_s=settings.cookie_ttl_s,
            cookies=self._cookies, revoked_at=grants.revoked_at(route.session_id, route.app),
        )  # fmt: skip
        if token is None or allowed.claims is None:
            return allowed
        try:
            first = await grants.claim(allowed.claims.grant)
        except GrantsUnavailable as exc:
            raise access.Refused(503, str(exc)) from None
        if not first:
            raise access.Refused(401, "this app URL was used already: open the app again "
                                 "(startApp) for a new one")  # fmt: skip
        return allowed

    async def _to_port(self, send: Send, scope: Scope, port: int, mount: Mount, query: str) -> None:
        """Port mode: the app's path URL (a ``startApp`` URL, token and all) sends the
        browser to the app's own port."""
        scheme = "https" if self._secure else "http"
        at_port = f"{scheme}://{self._public_host}:{port}".encode()
        await _redirect(send, 307, at_port + headers.target(scope, mount.prefix, query))

    async def _set_cookie(self, send: Send, scope: Scope, mount: Mount, cookie: str) -> None:
        """A URL token becomes the app's cookie; the browser is sent on without the token."""
        header = access.set_cookie_header(
            mount.cookie, mount.cookie_path, cookie,
            max_age_s=self.service.settings.cookie_ttl_s, secure=self._secure,
        )  # fmt: skip
        await _redirect(send, 303, headers.target(scope, ""), (b"set-cookie", header.encode()))

    async def _forward(
        self, scope: Scope, receive: Receive, send: Send, route: Route, mount: Mount,
        query: str | None,
    ) -> None:  # fmt: skip
        head_only = scope["method"] == "HEAD"
        exchange: Exchange | None = None
        try:
            whole = await small_body(scope, receive)
            request, body = request_head(scope, route.upstream, mount.prefix, query, whole=whole)
            exchange = await self.relay.exchange(
                address_key(route.upstream), request, body, receive, head_only
            )
            head = await exchange.head()
        except UpstreamError as exc:
            if exchange is not None:
                exchange.abort()
            log.info("appproxy: %s/%s did not answer: %s", route.session_id, route.app, exc)
            await plain(send, 502, f"the app {route.app} does not answer")
            return
        try:
            if not await self.relay.answer(exchange, head, send, receive, head_only):
                log.info("appproxy: %s/%s broke off", route.session_id, route.app)
                await plain(send, 502, "the app broke off")
        finally:
            self.relay.pool.release(exchange)


def _cookie(scope: Scope, wanted: str) -> str | None:
    for name, value in scope["headers"]:
        if name == b"cookie" and wanted.encode() in value:
            header: str = value.decode("latin-1")
            for name_value in header.split(";"):
                cookie, _, text = name_value.strip().partition("=")
                if cookie == wanted:
                    return text
    return None


async def _redirect(send: Send, status: int, location: bytes, *more: tuple[bytes, bytes]) -> None:
    await send({
        "type": "http.response.start", "status": status,
        "headers": [(b"location", location), *more, (b"content-length", b"0")],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": b""})
