"""The web console's routes on the gateway: its pages and their assets under ``/console/``,
the rules its forms check (``/console/rules.json``) and the relay to the storage data plane
(``/console/storage/...``); ``/`` sends a browser to the console. Reads and writes no
subjects: the pages talk to ``/graphql`` like any client, with the same credentials.

Every asset is a file of ``static/`` (no CDN, no build step); the Content-Security-Policy
says so to the browser too, so a page that named another host would fail loudly in a test.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from schemas.bounds import InputLimits
from services.gateway.console.relay import METHODS, RELAY_PATH, StorageRelay
from services.gateway.console.rules import form_rules

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

STATIC = Path(__file__).parent / "static"
CONSOLE_PATH = "/console"
VENDOR = "/vendor/"


def content_security_policy(appproxy_url: str) -> str:
    """Scripts, styles, images and fonts from the console's own origin only; connections to
    it (GraphQL over HTTP and WebSocket) and to the app proxy (the terminal's WebSocket).
    Inline styles are allowed for xterm.js, which sizes its rows with a style element."""
    proxy = urlsplit(appproxy_url)
    ws_scheme = "wss" if proxy.scheme == "https" else "ws"
    connect = f"'self' {ws_scheme}://{proxy.netloc}" if proxy.netloc else "'self'"
    return "; ".join(
        (
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data:",
            f"connect-src {connect}",
            "frame-ancestors 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "object-src 'none'",
        )
    )


def _with_headers(app: ASGIApp, policy: str) -> ASGIApp:
    """The pages' security headers; vendored files (their version is in their path) are
    cached for a year, the console's own revalidated on every load (ETag), so an upgrade
    shows at once."""

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        # Starlette's Mount keeps the full path and puts the mount's prefix in root_path.
        path, prefix = str(scope["path"]), str(scope.get("root_path", ""))
        vendored = (path[len(prefix) :] if path.startswith(prefix) else path).startswith(VENDOR)
        cache = b"public, max-age=31536000, immutable" if vendored else b"no-cache"

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [
                    *message.get("headers", []),
                    (b"cache-control", cache),
                    (b"content-security-policy", policy.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
            await send(message)

        await app(scope, receive, with_headers)

    return served


def console_routes(*, limits: InputLimits, storage_url: str, appproxy_url: str) -> list[BaseRoute]:
    """The routes ``services.gateway.http.build_app`` adds; ``limits`` are the gateway's own,
    the URLs its settings' public ones."""
    rules = JSONResponse(form_rules(limits), headers={"cache-control": "no-cache"})
    to_console = RedirectResponse(f"{CONSOLE_PATH}/", status_code=308)
    pages = StaticFiles(directory=STATIC, html=True)
    return [
        Route("/", to_console, methods=["GET", "HEAD"]),
        Route(CONSOLE_PATH, to_console, methods=["GET", "HEAD"]),
        Route(f"{CONSOLE_PATH}/rules.json", rules, methods=["GET", "HEAD"]),
        Route(f"{RELAY_PATH}/{{target:path}}", StorageRelay(storage_url).relay, methods=METHODS),
        Mount(CONSOLE_PATH, app=_with_headers(pages, content_security_policy(appproxy_url))),
    ]
