"""Who may use an app through the proxy: a public app anyone; otherwise a URL token from
``startApp`` (turned into a cookie) or that cookie, naming this session's app and a person who
owns the session or administers its domain, issued after the owner last revoked access. Pure
(``now`` and the revocation are passed in); no subjects. That a URL token is used only once is
the caller's to make sure (``grants.Grants.claim``, after this check passes).

401: no credentials, or ones that cannot be read, have expired or were revoked (ask
``startApp`` again).
403: good credentials for someone else's session, or for another app.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from schemas.app_tokens import COOKIE, AppClaims, AppTokenError, TokenKind, issue, verify
from services.appproxy.routes import Route

TOKEN_PARAM = "token"


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


@dataclass(frozen=True, slots=True)
class Allowed:
    claims: AppClaims | None
    """None for a public app."""
    cookie: str | None = None
    """A cookie token to set (and redirect without the URL token): only for a URL token."""


def check(
    route: Route,
    key: bytes,
    *,
    token: str | None,
    cookie: str | None,
    now: float,
    max_url_ttl_s: float,
    cookie_ttl_s: float,
    cookies: CookieCache | None = None,
    revoked_at: float | None = None,
) -> Allowed:
    if route.public:
        return Allowed(None)
    try:
        if token is not None:
            claims = verify(key, token, now=now, kind=TokenKind.URL, max_ttl_s=max_url_ttl_s)
        elif cookie is not None:
            known = cookies.get(cookie, now) if cookies is not None else None
            if known is None:
                known = verify(key, cookie, now=now, kind=TokenKind.COOKIE, max_ttl_s=cookie_ttl_s)
                if cookies is not None:
                    cookies.put(cookie, known)
            claims = known
        else:
            raise Refused(401, "sign in: open this app through the API (startApp)")
    except AppTokenError as exc:
        raise Refused(401, str(exc)) from None
    if (claims.session, claims.app) != (route.session_id, route.app):
        raise Refused(403, "these credentials are for another app")
    if not claims.allows(route.owner):
        raise Refused(403, f"session {route.session_id} is not yours")
    if revoked_at is not None and claims.iat <= revoked_at:
        raise Refused(401, "access to this app was revoked: open it again (startApp)")
    if token is None:
        return Allowed(claims)
    return Allowed(claims, issue(key, claims.as_cookie(now, int(now + cookie_ttl_s))))


class CookieCache:
    """Cookies already verified, so that a browser's every request is not a signature check
    and a JSON parse again. Bounded (emptied when full); an entry past its expiry is not
    returned. Only well-signed cookies go in, so a client cannot fill it with forgeries."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._known: dict[str, AppClaims] = {}

    def get(self, cookie: str, now: float) -> AppClaims | None:
        claims = self._known.get(cookie)
        if claims is None:
            return None
        if claims.exp <= now:
            del self._known[cookie]
            return None
        return claims

    def put(self, cookie: str, claims: AppClaims) -> None:
        if len(self._known) >= self._size:
            self._known.clear()
        self._known[cookie] = claims


def without_token(query: str) -> str:
    """The query string less the ``token`` parameter."""
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != TOKEN_PARAM]
    return urlencode(kept)


def token_of(query: str) -> str | None:
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == TOKEN_PARAM:
            return value
    return None


def prefix(session_id: str, app: str) -> str:
    return f"/apps/{session_id}/{app}"


def set_cookie_header(name: str, path: str, value: str, *, max_age_s: float, secure: bool) -> str:
    """A cookie that only this app's URLs send back (its path, or its port's own name), never
    to scripts, not on cross-site posts."""
    parts = [f"{name}={value}", f"Path={path}", f"Max-Age={int(max_age_s)}", "HttpOnly",
             "SameSite=Lax"]  # fmt: skip
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def strip_cookie(header: str) -> str:
    """A ``Cookie`` header less the proxy's own cookies (``jetyard_app`` and port mode's
    ``jetyard_app_<port>``): no app sees a grant."""
    kept = [c.strip() for c in header.split(";") if not _ours(c.strip().split("=", 1)[0])]
    return "; ".join(c for c in kept if c)


def _ours(name: str) -> bool:
    return name == COOKIE or name.startswith(COOKIE + "_")
