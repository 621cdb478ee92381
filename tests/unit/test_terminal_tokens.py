"""Terminal tokens (issued by the proxy, checked by the agent) and the terminal's messages."""

from __future__ import annotations

import pytest

from schemas.terminal_tokens import (
    MAX_TTL_S,
    TerminalTokenError,
    issue,
    resize_message,
    resize_of,
    size_of,
    verify,
)

KEY = b"k" * 32
NOW = 1_700_000_000.0


def test_a_token_names_its_kernel_until_it_expires() -> None:
    token = issue(KEY, "kernel-1", now=NOW)

    assert verify(KEY, token, now=NOW + 59).kernel == "kernel-1"
    with pytest.raises(TerminalTokenError, match="expired"):
        verify(KEY, token, now=NOW + 60)


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("", "malformed"),
        ("a1.e30." + "A" * 43, "malformed"),
        (issue(b"x" * 32, "kernel-1", now=NOW), "signature"),
        (issue(KEY, "kernel-1", now=NOW)[:-2] + "AA", "signature"),
        (issue(KEY, "kernel-1", now=NOW, ttl_s=MAX_TTL_S + 10), "too far ahead"),
    ],
)
def test_a_bad_token_is_refused(token: str, why: str) -> None:
    with pytest.raises(TerminalTokenError, match=why):
        verify(KEY, token, now=NOW)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (resize_message(100, 30), (100, 30)),
        ('{"resize": [80, 24]}', (80, 24)),
        ("ls\r", None),
        ("{not json", None),
        ('{"resize": [80]}', None),
        ('{"resize": [0, 24]}', None),
        ('{"resize": [80, 24.5]}', None),
        ('{"resize": [true, 24]}', None),
        ('{"resize": [80, 24], "x": 1}', None),
        ('{"resize": [80, 100000]}', None),
    ],
)
def test_only_a_well_formed_resize_is_one(text: str, size: tuple[int, int] | None) -> None:
    assert resize_of(text) == size


def test_the_size_asked_in_the_query() -> None:
    assert size_of("120", "40") == (120, 40)
    assert size_of(None, "40") is None
    assert size_of("-1", "40") is None
    assert size_of("wide", "40") is None
