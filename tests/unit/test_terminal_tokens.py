"""Terminal tokens (issued by the proxy, checked by the agent, accepted once) and the
terminal's messages, with a TTY and without one."""

from __future__ import annotations

import pytest

from schemas.terminal_tokens import (
    MAX_EXEC_WORDS,
    MAX_TTL_S,
    STDERR,
    STDOUT,
    TTL_S,
    Ended,
    ExecError,
    TerminalTokenError,
    UsedTokens,
    ended_of,
    error_message,
    exec_message,
    exec_of,
    exit_message,
    issue,
    output_frame,
    output_of,
    resize_message,
    resize_of,
    size_of,
    verify,
)

KEY = b"k" * 32
NOW = 1_700_000_000.0


def test_a_token_names_its_kernel_until_it_expires() -> None:
    token = issue(KEY, "kernel-1", now=NOW)

    assert verify(KEY, token, now=NOW + TTL_S - 1).kernel == "kernel-1"
    with pytest.raises(TerminalTokenError, match="expired"):
        verify(KEY, token, now=NOW + TTL_S)


def test_each_token_is_one_of_its_kind() -> None:
    first, second = (verify(KEY, issue(KEY, "kernel-1", now=NOW), now=NOW) for _ in range(2))

    assert first.nonce != second.nonce and len(first.nonce) >= 16


def test_a_token_is_accepted_once_and_remembered_until_it_expires() -> None:
    used = UsedTokens()
    claims = verify(KEY, issue(KEY, "kernel-1", now=NOW), now=NOW)
    used.spend(claims, now=NOW)

    with pytest.raises(TerminalTokenError, match="used already"):
        used.spend(claims, now=NOW + TTL_S - 1)
    other = verify(KEY, issue(KEY, "kernel-1", now=NOW + TTL_S), now=NOW + TTL_S)
    used.spend(other, now=NOW + TTL_S)  # the first one expired: forgotten, and refused anyway
    assert len(used) == 1


def test_the_memory_of_used_tokens_is_bounded() -> None:
    used = UsedTokens(limit=2)
    for _ in range(2):
        used.spend(verify(KEY, issue(KEY, "k", now=NOW), now=NOW), now=NOW)

    with pytest.raises(TerminalTokenError, match="too many"):
        used.spend(verify(KEY, issue(KEY, "k", now=NOW), now=NOW), now=NOW + 1)
    used.spend(verify(KEY, issue(KEY, "k", now=NOW + TTL_S), now=NOW + TTL_S), now=NOW + TTL_S)
    assert len(used) == 1


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


def test_a_command_frame_round_trips_and_a_bad_one_is_refused() -> None:
    assert exec_of(exec_message(["sh", "-c", "exit 7"])) == ["sh", "-c", "exit 7"]
    assert exec_of(exec_message([])) == []
    for bad, why in [
        ("ls", "first frame"),
        ('{"exec": "ls"}', "first frame"),
        ('{"exec": [1]}', "first frame"),
        ('{"exec": [], "x": 1}', "first frame"),
        ('{"exec": ["a\\u0000b"]}', "NUL"),
        ('{"exec": [' + ",".join(['"w"'] * (MAX_EXEC_WORDS + 1)) + "]}", "words"),
        ('{"exec": ["' + "x" * 200_000 + '"]}', "characters"),
    ]:
        with pytest.raises(ExecError, match=why):
            exec_of(bad)
    with pytest.raises(ExecError, match="words"):
        exec_message(["w"] * (MAX_EXEC_WORDS + 1))  # refused before it is sent


def test_output_frames_say_their_stream() -> None:
    assert output_of(output_frame(STDOUT, b"out")) == (STDOUT, b"out")
    assert output_of(output_frame(STDERR, b"")) == (STDERR, b"")
    with pytest.raises(ExecError):
        output_of(b"\x05data")
    with pytest.raises(ExecError):
        output_of(b"")


@pytest.mark.parametrize(
    ("text", "ended"),
    [
        (exit_message(7), Ended(exit_code=7)),
        (exit_message(0), Ended(exit_code=0)),
        (error_message("no such program"), Ended(error="no such program")),
        ('{"exit": "7"}', None),
        ('{"exit": true}', None),
        ('{"exit": 1, "x": 2}', None),
        (resize_message(80, 24), None),
        ("plain", None),
    ],
)
def test_the_end_of_a_command(text: str, ended: Ended | None) -> None:
    assert ended_of(text) == ended
