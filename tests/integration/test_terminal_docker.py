"""A kernel's terminal on the real Docker engine, at its agent's endpoint: a command typed runs
in the container and its output comes back; a resize changes ``stty size``; Ctrl-C stops a
foreground command; a program that ignores Ctrl-C and Ctrl-D is killed once the client has
gone; a request without a good token for that kernel is refused."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import websockets
from websockets.asyncio.client import connect

from schemas.ids import new_id
from schemas.terminal_tokens import HEADER, issue, resize_message
from services.node.backend import LABEL_KERNEL
from tests.integration.replica_support import until
from tests.integration.terminal_support import (
    TERMINAL_KEY,
    Kernel,
    kernel_with_terminal,
    read_until,
)


@pytest.fixture
async def kernel(tmp_path: Path) -> AsyncIterator[Kernel]:
    async with kernel_with_terminal(tmp_path) as kernel:
        yield kernel


def _token(kernel_id: str, key: str = TERMINAL_KEY) -> dict[str, str]:
    return {HEADER: issue(key.encode(), kernel_id, now=time.time())}


async def test_a_command_runs_and_a_resize_changes_the_size(kernel: Kernel) -> None:
    url = f"{kernel.terminal_url}/kernels/{kernel.id}/pty?cols=80&rows=24"
    async with connect(url, additional_headers=_token(kernel.id)) as ws:
        await ws.send("stty size\n")
        assert b"24 80" in await read_until(ws, b"24 80\r\n")
        await ws.send("echo $((6*7))\n")
        assert b"42\r\n" in await read_until(ws, b"42\r\n")

        await ws.send(resize_message(100, 30))
        await ws.send(b"stty size\n")
        await read_until(ws, b"30 100\r\n")

        await ws.send("sleep 600; echo not-interrupted\n")
        await asyncio.sleep(1)  # typed at once, the shell's line editor would read Ctrl-C
        await ws.send("\x03")
        await ws.send("echo caf\u00e9-$((1+1))\n")
        assert "café-2".encode() in await read_until(ws, "café-2\r\n".encode())

        await ws.send("exit\n")
        with pytest.raises(websockets.exceptions.ConnectionClosedOK):
            await read_until(ws, b"never")


@pytest.mark.parametrize("case", ["missing", "forged", "other-kernel"])
async def test_without_a_good_token_for_the_kernel_it_is_refused(kernel: Kernel, case: str) -> None:
    headers = {
        "missing": {},
        "forged": _token(kernel.id, "f" * 40),
        "other-kernel": _token(new_id()),
    }[case]
    url = f"{kernel.terminal_url}/kernels/{kernel.id}/pty"
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        async with connect(url, additional_headers=headers):
            pass
    assert refused.value.response.status_code == (403 if case == "other-kernel" else 401)


async def test_a_kernel_that_does_not_run_here_is_not_found(kernel: Kernel) -> None:
    other = new_id()
    with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
        async with connect(f"{kernel.terminal_url}/kernels/{other}/pty",
                           additional_headers=_token(other)):  # fmt: skip
            pass
    assert refused.value.response.status_code == 404


async def test_what_ignores_the_hang_up_is_killed_when_the_client_goes(kernel: Kernel) -> None:
    """Ctrl-C and Ctrl-D reach a program that ignores both; it is killed all the same."""
    url = f"{kernel.terminal_url}/kernels/{kernel.id}/pty"
    async with connect(url, additional_headers=_token(kernel.id)) as ws:
        await ws.send("sh -c 'trap \"\" INT HUP TERM QUIT; exec sleep 4242'\n")
        await until("the program started", 15, lambda: "sleep 4242" in _processes(kernel))
    await until("the program killed", 15, lambda: "sleep 4242" not in _processes(kernel))


async def test_what_outlives_the_shell_is_killed_when_the_client_goes(kernel: Kernel) -> None:
    """A background program that ignores the hang-up: the shell ends at once on Ctrl-D (its
    prompt reads it), the program does not, and is killed all the same."""
    url = f"{kernel.terminal_url}/kernels/{kernel.id}/pty"
    async with connect(url, additional_headers=_token(kernel.id)) as ws:
        await ws.send("sh -c 'trap \"\" INT HUP TERM QUIT; exec sleep 4343' &\n")
        await until("the program started", 15, lambda: "sleep 4343" in _processes(kernel))
    await until("the program killed", 15, lambda: "sleep 4343" not in _processes(kernel))


def _processes(kernel: Kernel) -> str:
    ids = subprocess.run(
        ["docker", "ps", "--quiet", "--filter", f"label={LABEL_KERNEL}={kernel.id}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert ids, "the kernel's container is gone"
    top = subprocess.run(["docker", "top", ids[0]], capture_output=True, text=True, check=True)
    return top.stdout
