"""GraphQL subscriptions over graphql-transport-ws, as async iterators: ``connection_init``
with the client's credentials (the headers of a signed bodiless ``GET /graphql``, or the
login token), one ``subscribe``, then each ``next`` payload's ``data`` until ``complete``.
An ``error``, errors in a ``next`` or a refused connection become ``JetyardError``. Leaving
the loop early closes the socket."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from jetyard.sdk.auth import Auth
from jetyard.sdk.errors import JetyardError, refusal

PROTOCOL = Subprotocol("graphql-transport-ws")


def ws_url(endpoint: str) -> tuple[str, str]:
    """The WebSocket URL of ``<endpoint>/graphql`` and the host the credentials name."""
    parts = urlsplit(endpoint)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}/graphql", parts.netloc


async def subscribe(
    endpoint: str,
    auth: Auth,
    query: str,
    variables: dict[str, Any] | None = None,
    *,
    open_timeout_s: float = 30.0,
) -> AsyncGenerator[dict[str, Any], None]:
    url, host = ws_url(endpoint)
    try:
        async with connect(
            url, subprotocols=[PROTOCOL], max_size=None, open_timeout=open_timeout_s
        ) as ws:
            init = {"type": "connection_init", "payload": auth.connection_params(host)}
            await ws.send(json.dumps(init))
            ack = json.loads(await asyncio.wait_for(ws.recv(), open_timeout_s))
            if ack.get("type") != "connection_ack":
                raise JetyardError(f"the gateway did not accept the subscription: {ack}")
            payload = {"query": query, "variables": variables or {}}
            await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": payload}))
            async for raw in ws:
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "ping":
                    await ws.send(json.dumps({"type": "pong"}))
                elif kind == "next":
                    body = message.get("payload") or {}
                    if body.get("errors"):
                        raise refusal(body["errors"])
                    yield body.get("data") or {}
                elif kind == "error":
                    raise refusal(message.get("payload"))
                elif kind == "complete":
                    return
            raise JetyardError(_closed(ws.close_code, ws.close_reason))
    except websockets.exceptions.ConnectionClosed as exc:
        code, reason = (exc.rcvd.code, exc.rcvd.reason) if exc.rcvd else (None, "")
        raise JetyardError(_closed(code, reason)) from None
    except (OSError, websockets.exceptions.InvalidHandshake, TimeoutError) as exc:
        raise JetyardError(f"cannot open a subscription at {url}: {exc}") from exc


def _closed(code: int | None, reason: str | None) -> str:
    if code == 4403:
        return f"the gateway refused the subscription's credentials ({reason or 'forbidden'})"
    return f"the subscription closed before it completed (code {code}: {reason or 'no reason'})"
