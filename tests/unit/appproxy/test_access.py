"""App tokens and the proxy's access rules: URL token → cookie, cookie → pass, else 401/403."""

from __future__ import annotations

from typing import cast

import pytest

from events.bus import Bus
from schemas.app_tokens import (
    COOKIE,
    AppClaims,
    AppTokenError,
    TokenKind,
    issue,
    revocation_of,
    revoked_key,
    verify,
)
from services.appproxy import access
from services.appproxy.grants import Grants
from services.appproxy.routes import Route

KEY = b"k" * 32
NOW = 1_800_000_000.0
GRANT = "g" * 24
ROUTE = Route("s1", "k1", "web", "10.0.0.2:80", "alice", "d", public=False)


def tok(user: str = "alice", *, app: str = "web", admin: bool = False, ttl: int = 60,
        kind: TokenKind = TokenKind.URL) -> str:  # fmt: skip
    claims = AppClaims(session="s1", app=app, user=user, admin=admin, kind=kind,
                       grant=GRANT, iat=NOW, exp=int(NOW) + ttl)  # fmt: skip
    return issue(KEY, claims)


def check(
    token: str | None = None, cookie: str | None = None, route: Route = ROUTE
) -> access.Allowed:
    return access.check(route, KEY, token=token, cookie=cookie, now=NOW,
                        max_url_ttl_s=900, cookie_ttl_s=3600)  # fmt: skip


def test_a_token_round_trips_and_a_tampered_one_does_not() -> None:
    token = tok()
    claims = verify(KEY, token, now=NOW, kind=TokenKind.URL, max_ttl_s=900)
    assert (claims.session, claims.app, claims.user) == ("s1", "web", "alice")
    head, payload, signature = token.split(".")
    for bad in (f"{head}.{payload}x.{signature}", token + "x", "", "a1..x"):
        with pytest.raises(AppTokenError):
            verify(KEY, bad, now=NOW, kind=TokenKind.URL, max_ttl_s=900)
    with pytest.raises(AppTokenError, match="signature"):
        verify(b"z" * 32, token, now=NOW, kind=TokenKind.URL, max_ttl_s=900)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (tok(ttl=-1), "expired"),
        (tok(ttl=10_000), "too far"),
        (tok(kind=TokenKind.COOKIE), "cannot be used"),
    ],
)
def test_expired_far_or_wrong_kind_tokens_are_refused(token: str, why: str) -> None:
    with pytest.raises(AppTokenError, match=why):
        verify(KEY, token, now=NOW, kind=TokenKind.URL, max_ttl_s=900)


def test_the_owners_url_token_becomes_a_cookie_that_passes() -> None:
    allowed = check(token=tok())
    assert allowed.cookie is not None

    again = check(cookie=allowed.cookie)
    assert again.cookie is None and again.claims is not None
    assert again.claims.kind is TokenKind.COOKIE and again.claims.exp == int(NOW) + 3600


@pytest.mark.parametrize(
    ("token", "cookie", "status"),
    [
        (None, None, 401),
        ("garbage", None, 401),
        (None, tok(), 401),  # a URL token is no cookie
        (tok("bob"), None, 403),
        (tok(app="other"), None, 403),
        (None, tok("bob", kind=TokenKind.COOKIE), 403),
    ],
)
def test_refusals(token: str | None, cookie: str | None, status: int) -> None:
    with pytest.raises(access.Refused) as refused:
        check(token, cookie)
    assert refused.value.status == status


def test_admins_and_public_apps_pass() -> None:
    assert check(token=tok("root", admin=True)).cookie is not None
    public = Route("s1", "k1", "web", "a:1", "alice", "d", public=True)
    assert check(route=public) == access.Allowed(None)


def test_the_cookie_is_scoped_to_the_app_and_never_reaches_it() -> None:
    header = access.set_cookie_header(COOKIE, "/apps/s1/web/", "v", max_age_s=3600, secure=True)
    assert header == (f"{COOKIE}=v; Path=/apps/s1/web/; Max-Age=3600; HttpOnly; SameSite=Lax; "
                      "Secure")  # fmt: skip
    assert access.strip_cookie(f"a=1; {COOKIE}=v; b=2") == "a=1; b=2"
    # Port mode's cookies (one name per port) never reach any app either.
    assert access.strip_cookie(f"{COOKIE}_10200=v; c=3; {COOKIE}_10201=w") == "c=3"
    assert access.strip_cookie(f"{COOKIE}x=1") == f"{COOKIE}x=1"
    assert access.strip_cookie(f"{COOKIE}=v") == ""
    assert access.without_token("x=1&token=abc&y=") == "x=1&y="
    assert access.token_of("x=1&token=abc") == "abc"


def _later(cookie: str, revoked_at: float) -> access.Allowed:
    return access.check(ROUTE, KEY, token=None, cookie=cookie, now=NOW + 5, max_url_ttl_s=900,
                        cookie_ttl_s=3600, revoked_at=revoked_at)  # fmt: skip


def test_a_revocation_voids_what_was_issued_at_or_before_it_and_not_after() -> None:
    cookie = check(token=tok()).cookie  # minted at NOW
    assert cookie is not None
    assert _later(cookie, revoked_at=NOW - 1).claims is not None
    for revoked_at in (NOW, NOW + 1):
        with pytest.raises(access.Refused, match="revoked") as refused:
            _later(cookie, revoked_at)
        assert refused.value.status == 401
    with pytest.raises(access.Refused, match="revoked"):
        access.check(ROUTE, KEY, token=tok(), cookie=None, now=NOW, max_url_ttl_s=900,
                     cookie_ttl_s=3600, revoked_at=NOW)  # fmt: skip


def test_revocations_are_followed_per_app_and_for_all_apps() -> None:
    grants = Grants(cast(Bus, None))
    grants._update(revoked_key("s1", "web"), b"100.5", None)
    grants._update(revoked_key("s2", None), b"200", None)
    grants._update(revoked_key("s1", "web"), b"not a time", None)  # ignored, logged
    grants._update("url.abc", b"", None)  # a claimed URL: no revocation
    assert grants.revoked_at("s1", "web") == 100.5
    assert grants.revoked_at("s1", "other") is None
    assert grants.revoked_at("s2", "web") == 200.0
    grants._update(revoked_key("s2", "web"), b"300", None)
    assert grants.revoked_at("s2", "web") == 300.0 and grants.revoked_at("s2", "x") == 200.0
    grants._update(revoked_key("s1", "web"), None, "PURGE")  # expired with its last cookie
    assert grants.revoked_at("s1", "web") is None
    assert revocation_of(revoked_key("s1", None)) == ("s1", None)
    assert revocation_of("revoked.s1") is None
