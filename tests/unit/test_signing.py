"""Request signing: published test vectors (for SDK authors in any language), each recomputed
here from the scheme's definition with hmac/hashlib alone, and the header parser."""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from schemas.signing import (
    SigningError,
    authorization,
    check_nonce,
    derive_key,
    parse_authorization,
    parse_date,
    sign,
    signed_headers,
    string_to_sign,
)

SECRET = "sk-test-0123456789"
BODY = b'{"query":"{ sessions { id } }"}'
# 23:30 at -02:00 is 01:30 UTC the next day: the key is derived from the UTC day, 20250201.
DATE = "2025-01-31T23:30:00-02:00"
NONCE = "abcdefghijklmnop0123"
HOST = "Gateway.Example:8080"

VECTOR_SIGNATURE = "e689a736351bdd82da782a4d83b704f8d6e53284e3dcaa8817541ca2b33d2bcb"
EMPTY_VECTOR_SIGNATURE = "93bd2f2027da440b4961fef0f3e14cded789d86b926389c4d3d07ce69ce2dc96"


def reference_signature(secret: str, text: str, day: str, host: str) -> str:
    k_date = hmac.new(secret.encode(), day.encode(), hashlib.sha256).digest()
    key = hmac.new(k_date, host.encode(), hashlib.sha256).digest()
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def test_string_to_sign_is_the_seven_lines_of_the_scheme() -> None:
    text = string_to_sign("post", "/graphql?x=1", DATE, HOST, "Application/JSON", NONCE, BODY)

    assert text.split("\n") == [
        "POST",
        "/graphql?x=1",
        DATE,
        "host:gateway.example:8080",
        "content-type:application/json",
        f"x-jetyard-nonce:{NONCE}",
        hashlib.sha256(BODY).hexdigest(),
    ]


def test_vector_with_body_query_port_and_a_non_utc_date() -> None:
    text = (
        "POST\n/graphql?x=1\n2025-01-31T23:30:00-02:00\nhost:gateway.example:8080\n"
        "content-type:application/json\nx-jetyard-nonce:abcdefghijklmnop0123\n"
        + hashlib.sha256(BODY).hexdigest()
    )
    expected = reference_signature(SECRET, text, "20250201", "gateway.example:8080")

    got = sign(SECRET, "post", "/graphql?x=1", DATE, HOST, "Application/JSON", NONCE, BODY)

    assert got == expected == VECTOR_SIGNATURE


def test_vector_with_empty_body_and_no_content_type() -> None:
    nonce = "n" * 16
    text = (
        f"GET\n/healthz\n2025-01-01T00:00:00+00:00\nhost:h\ncontent-type:\n"
        f"x-jetyard-nonce:{nonce}\n" + hashlib.sha256(b"").hexdigest()
    )
    expected = reference_signature("s", text, "20250101", "h")

    got = sign("s", "GET", "/healthz", "2025-01-01T00:00:00+00:00", "h", "", nonce, b"")

    assert got == expected == EMPTY_VECTOR_SIGNATURE


def test_the_derived_key_changes_with_the_day_and_the_host() -> None:
    day = datetime(2025, 3, 1, 12, tzinfo=UTC)

    assert derive_key(SECRET, day, "a") != derive_key(SECRET, day + timedelta(days=1), "a")
    assert derive_key(SECRET, day, "a") != derive_key(SECRET, day, "b")
    assert derive_key(SECRET, day, "A") == derive_key(SECRET, day, "a")


@pytest.mark.parametrize(
    "change",
    [
        {"method": "PUT"},
        {"path_with_query": "/graphql?x=2"},
        {"date": "2025-01-31T23:30:01-02:00"},
        {"host": "other.example:8080"},
        {"content_type": "text/plain"},
        {"nonce": "x" * 16},
        {"body": b"{}"},
        {"secret_key": "another-secret"},
    ],
)
def test_changing_any_signed_part_changes_the_signature(change: dict[str, Any]) -> None:
    base: dict[str, Any] = {
        "secret_key": SECRET,
        "method": "POST",
        "path_with_query": "/graphql?x=1",
        "date": DATE,
        "host": HOST,
        "content_type": "application/json",
        "nonce": NONCE,
        "body": BODY,
    }

    assert sign(**{**base, **change}) != sign(**base)


def test_authorization_header_round_trips() -> None:
    header = authorization("AKTEST", VECTOR_SIGNATURE)

    assert header == f"Jetyard signMethod=HMAC-SHA256, credential=AKTEST:{VECTOR_SIGNATURE}"
    assert parse_authorization(header) == ("AKTEST", VECTOR_SIGNATURE)
    shouted = f"JETYARD SIGNMETHOD=hmac-sha256 , CREDENTIAL=AKTEST:{VECTOR_SIGNATURE.upper()}"
    assert parse_authorization(shouted) == ("AKTEST", VECTOR_SIGNATURE)


@pytest.mark.parametrize(
    ("header", "says"),
    [
        ("", "must read"),
        ("BackendAI signMethod=HMAC-SHA256, credential=AK:" + "0" * 64, "must read"),
        ("Jetyard signMethod=HMAC-SHA256, credential=AK:" + "0" * 63, "must read"),
        ("Jetyard signMethod=HMAC-SHA256, credential=AK.x:" + "0" * 64, "must read"),
        ("Jetyard signMethod=HMAC-MD5, credential=AK:" + "0" * 64, "not supported"),
    ],
)
def test_malformed_authorization_is_refused_with_the_expected_shape(header: str, says: str) -> None:
    with pytest.raises(SigningError, match=says):
        parse_authorization(header)
    assert issubclass(SigningError, ValueError)


def test_dates_need_a_timezone_and_nonces_the_token_rule() -> None:
    assert parse_date("2025-01-31T23:30:00Z") == datetime(2025, 1, 31, 23, 30, tzinfo=UTC)
    with pytest.raises(SigningError, match="no timezone"):
        parse_date("2025-01-31T23:30:00")
    with pytest.raises(SigningError, match="not an ISO-8601 date"):
        parse_date("yesterday")
    with pytest.raises(SigningError, match="16 to 64"):
        check_nonce("short")
    with pytest.raises(SigningError, match="16 to 64"):
        check_nonce("has.a.dot.in.it.....")


def test_signed_headers_sign_what_they_carry() -> None:
    now = datetime(2025, 1, 31, 23, 30, tzinfo=timezone(timedelta(hours=-2)))

    headers = signed_headers(
        "AKTEST", SECRET, "post", "/graphql?x=1", HOST, "Application/JSON", BODY, now, NONCE
    )

    assert headers["X-Jetyard-Date"] == DATE
    assert headers["X-Jetyard-Nonce"] == NONCE
    assert parse_authorization(headers["Authorization"]) == ("AKTEST", VECTOR_SIGNATURE)
    fresh = signed_headers("AKTEST", SECRET, "GET", "/", HOST, "", b"", now)
    assert (
        fresh["X-Jetyard-Nonce"]
        != signed_headers("AKTEST", SECRET, "GET", "/", HOST, "", b"", now)["X-Jetyard-Nonce"]
    )
