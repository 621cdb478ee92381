"""What of a client's request reaches an app, and of its answer the client, for plain HTTP
(``forward.py``) and WebSockets (``http.py``) alike: the path less the app's prefix, the query
less the proxy's ``token``, the headers less hop-by-hop ones (and those ``Connection`` names), a
client's own forwarding headers and the proxy's cookies, with ``X-Forwarded-For``/``-Host``/
``-Proto``/``-Prefix`` set by the proxy alone. Pure; no subjects.
"""

from __future__ import annotations

from starlette.types import Scope

from services.appproxy import access

HOP_BY_HOP = frozenset({
    b"connection", b"keep-alive", b"proxy-authenticate", b"proxy-authorization", b"te",
    b"trailer", b"trailers", b"transfer-encoding", b"upgrade", b"host", b"expect",
    b"proxy-connection",
})  # fmt: skip
FORWARDED = frozenset({b"x-forwarded-for", b"x-forwarded-host", b"x-forwarded-proto",
                       b"x-forwarded-prefix", b"forwarded"})  # fmt: skip


def target(scope: Scope, prefix: str, query: str | None = None) -> bytes:
    """The request's path less ``prefix`` (``/`` at least) and its query less the token, or
    ``query`` instead when given (one known to have no token need not be parsed again)."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    mounted = prefix.encode()
    path = raw[len(mounted) :] if raw.startswith(mounted) else raw
    if query is None:
        query = access.without_token(scope.get("query_string", b"").decode("latin-1"))
    return (path or b"/") + (b"?" + query.encode("latin-1") if query else b"")


def to_app(
    scope: Scope, prefix: str, drop: frozenset[bytes] = frozenset()
) -> list[tuple[bytes, bytes]]:
    """The request's headers as the app gets them (``drop``: more names to leave out)."""
    named: set[bytes] = set()
    out: list[tuple[bytes, bytes]] = []
    host = b""
    for name, value in scope["headers"]:
        if name == b"connection":
            named.update(n.strip() for n in value.lower().split(b","))
        elif name == b"host":
            host = value
        if name in HOP_BY_HOP or name in FORWARDED or name in drop:
            continue
        if name == b"cookie":
            value = access.strip_cookie(value.decode("latin-1")).encode("latin-1")
            if not value:
                continue
        out.append((name, value))
    if named:  # headers the client named as hop-by-hop go too
        out = [(name, value) for name, value in out if name not in named]
    client = scope.get("client")
    out += [
        (b"x-forwarded-for", client[0].encode() if client else b""),
        (b"x-forwarded-host", host),
        (b"x-forwarded-proto", scope.get("scheme", "http").replace("ws", "http").encode()),
    ]
    if prefix:
        out.append((b"x-forwarded-prefix", prefix.encode()))
    return out


def to_client(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """An answer's headers (names lower-cased) less hop-by-hop ones and those its
    ``Connection`` names."""
    named = {n.strip().lower() for k, v in headers if k == b"connection" for n in v.split(b",")}
    return [(k, v) for k, v in headers if k not in HOP_BY_HOP and k not in named]
