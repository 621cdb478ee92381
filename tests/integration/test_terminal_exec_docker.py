"""A kernel's terminal without a TTY (``?tty=0``), at its agent's endpoint on the real Docker
engine: one command runs, its stdout and stderr come back apart and unchanged (no ``\\r``, no
prompt), then its exit code; stdin reaches it until its end is sent (and stdin it never
reads does not hide its end); an empty command is the
shell reading stdin; a bad first frame is answered with an error. And a terminal token opens
one terminal: the same token again is refused."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import websockets
from websockets.asyncio.client import ClientConnection, connect

from schemas.terminal_tokens import (
    EOF_MESSAGE,
    HEADER,
    STDERR,
    STDOUT,
    Ended,
    ended_of,
    exec_message,
    issue,
    output_of,
)
from tests.integration.terminal_support import TERMINAL_KEY, Kernel, kernel_with_terminal


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    async with kernel_with_terminal(tmp_path) as kernel:
        yield kernel


def _url(kernel: Kernel) -> str:
    return f"{kernel.terminal_url}/kernels/{kernel.id}/pty?tty=0"


def _token(kernel: Kernel) -> dict[str, str]:
    return {HEADER: issue(TERMINAL_KEY.encode(), kernel.id, now=time.time())}


async def _to_the_end(ws: ClientConnection) -> tuple[bytes, bytes, Ended]:
    out = {STDOUT: b"", STDERR: b""}
    async for message in ws:
        if isinstance(message, bytes):
            stream, data = output_of(message)
            out[stream] += data
            continue
        ended = ended_of(message)
        assert ended is not None, message
        return out[STDOUT], out[STDERR], ended
    raise AssertionError(f"closed ({ws.close_code}) before the end was said")


async def test_a_command_gives_its_output_apart_and_its_exit_code(kernel: Kernel) -> None:
    async with connect(_url(kernel), additional_headers=_token(kernel)) as ws:
        await ws.send(exec_message(["sh", "-c", "echo out-$((6*7)); echo caf\u00e9 >&2; exit 7"]))
        await ws.send(EOF_MESSAGE)
        stdout, stderr, ended = await _to_the_end(ws)

    assert (stdout, stderr) == (b"out-42\n", "café\n".encode())
    assert ended == Ended(exit_code=7)


async def test_stdin_reaches_the_command_until_its_end(kernel: Kernel) -> None:
    async with connect(_url(kernel), additional_headers=_token(kernel)) as ws:
        await ws.send(exec_message(["sh", "-c", "wc -l; exit 3"]))
        await ws.send(b"one\ntwo\n")
        await ws.send(b"three\n")
        await ws.send(EOF_MESSAGE)
        stdout, stderr, ended = await _to_the_end(ws)

    assert (stdout.strip(), stderr, ended.exit_code) == (b"3", b"", 3)


async def test_no_command_is_the_shell_reading_stdin(kernel: Kernel) -> None:
    async with connect(_url(kernel), additional_headers=_token(kernel)) as ws:
        await ws.send(exec_message([]))
        await ws.send(b"echo $((40+2))\nexit 4\n")
        await ws.send(EOF_MESSAGE)
        stdout, stderr, ended = await _to_the_end(ws)

    assert (stdout, stderr, ended.exit_code) == (b"42\n", b"", 4)


async def test_stdin_left_unread_when_the_command_ends_does_not_hide_its_end(
    kernel: Kernel,
) -> None:
    async with connect(_url(kernel), additional_headers=_token(kernel)) as ws:
        await ws.send(exec_message(["sh", "-c", "exit 9"]))
        for _ in range(16):  # 1 MiB: well past what a pipe holds unread
            await ws.send(b"x" * 65536)
        await ws.send(EOF_MESSAGE)
        _, _, ended = await _to_the_end(ws)

    assert ended == Ended(exit_code=9)


async def test_a_program_not_found_ends_with_the_engines_code(kernel: Kernel) -> None:
    async with connect(_url(kernel), additional_headers=_token(kernel)) as ws:
        await ws.send(exec_message(["no-such-program-here"]))
        await ws.send(EOF_MESSAGE)
        _, _, ended = await _to_the_end(ws)

    assert ended.exit_code in (126, 127), ended


@pytest.mark.parametrize("first", ["ls\n", '{"exec": "ls"}', '{"exec": [1]}'])
async def test_a_first_frame_that_is_no_command_is_answered_with_an_error(
    kernel: Kernel, first: str
) -> None:
    async with connect(_url(kernel), additional_headers=_token(kernel)) as ws:
        await ws.send(first)
        stdout, _, ended = await _to_the_end(ws)

    assert stdout == b"" and ended.error is not None and "exec" in ended.error, ended


async def test_a_terminal_token_opens_one_terminal(kernel: Kernel) -> None:
    headers = _token(kernel)
    async with connect(_url(kernel), additional_headers=headers) as ws:
        await ws.send(exec_message(["true"]))
        await ws.send(EOF_MESSAGE)
        assert (await _to_the_end(ws))[2].exit_code == 0

    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        async with connect(_url(kernel), additional_headers=headers):
            pass
    assert refused.value.response.status_code == 401
    assert b"used already" in refused.value.response.body
