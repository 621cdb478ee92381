"""``jetyard shell SESSION``: a shell in a running session's main kernel, through the app proxy
(``startApp(session, "terminal")``, then a WebSocket to the URL it returns, its token on the
handshake). Signs in as the other user commands do (``jetyard.sdk.config``: options,
``JETYARD_*``, then what ``jetyard login`` kept).

With a terminal on stdin it is put in raw mode (restored on exit) and its size is sent at the
start and on every SIGWINCH; otherwise stdin is relayed as it comes and its end is typed as
``exit``, so ``echo 'ls' | jetyard shell S`` runs ``ls`` and ends. Exit status 0 when the shell
ends, 1 when the gateway refuses or the session ends meanwhile, 2 for a usage error."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import termios
import tty
from collections.abc import Iterator
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection, connect

from jetyard.cli.common import add_credential_options, credentials
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.errors import JetyardError
from schemas.terminal_tokens import TERMINAL, resize_message

START_APP = """mutation($session: ID!, $app: String!) {
  startApp(sessionId: $session, app: $app) { url }
}"""
EOF_KEY = b"\nexit\n"
"""Typed when stdin ends. Not Ctrl-D: one typed before the shell reads its first line (cooked
mode) is lost, and a line ``exit`` waits in the TTY until the shell reads it."""


def add_parser(sub: Any) -> None:
    shell = sub.add_parser("shell", help="a shell in a running session (through the app proxy)")
    shell.add_argument("session", help="the session's id")
    add_credential_options(shell)


def run(args: argparse.Namespace) -> int:
    try:
        signed_in = credentials(args)
    except ConfigError as exc:
        print(f"jetyard shell: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_run(args, signed_in))
    except JetyardError as exc:
        print(f"jetyard shell: {exc}", file=sys.stderr)
        return 1
    except (OSError, websockets.exceptions.WebSocketException) as exc:
        print(f"jetyard shell: the terminal did not open: {exc}", file=sys.stderr)
        return 1


async def _run(args: argparse.Namespace, signed_in: Credentials) -> int:
    async with AsyncClient.from_config(signed_in) as client:
        data = await client.graphql(START_APP, {"session": args.session, "app": TERMINAL})
    url = str(data["startApp"]["url"]).replace("http", "ws", 1)
    interactive = sys.stdin.isatty()
    if interactive:
        cols, rows = shutil.get_terminal_size()
        url += f"&cols={cols}&rows={rows}"
    async with connect(url, max_size=None) as ws:
        with _raw(sys.stdin.fileno()) if interactive else contextlib.nullcontext():
            await _relay(ws, interactive)
    if ws.close_code not in (1000, None):
        reason = ws.close_reason or f"closed with code {ws.close_code}"
        print(f"\r\njetyard shell: {reason}", file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def _raw(fd: int) -> Iterator[None]:
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _relay(ws: ClientConnection, interactive: bool) -> None:
    loop = asyncio.get_running_loop()
    typed: asyncio.Queue[bytes | str] = asyncio.Queue()
    fd = sys.stdin.fileno()

    def readable() -> None:
        chunk = os.read(fd, 65536)
        if not chunk:
            loop.remove_reader(fd)
        typed.put_nowait(chunk or EOF_KEY)

    def resized() -> None:
        cols, rows = shutil.get_terminal_size()
        typed.put_nowait(resize_message(cols, rows))

    try:
        loop.add_reader(fd, readable)
        reading: asyncio.Task[None] | None = None
    except PermissionError:  # a regular file: no readiness to wait for, read it whole
        reading = asyncio.create_task(_read_file(fd, typed))
    if interactive:
        loop.add_signal_handler(signal.SIGWINCH, resized)

    async def inbound() -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            while True:
                await ws.send(await typed.get())

    async def outbound() -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            async for message in ws:
                out = message if isinstance(message, bytes) else message.encode()
                sys.stdout.buffer.write(out)
                sys.stdout.buffer.flush()

    sending = asyncio.create_task(inbound())
    try:
        await outbound()
    finally:
        sending.cancel()
        if reading is not None:
            reading.cancel()
        loop.remove_reader(fd)
        if interactive:
            loop.remove_signal_handler(signal.SIGWINCH)


async def _read_file(fd: int, typed: asyncio.Queue[bytes | str]) -> None:
    while chunk := await asyncio.to_thread(os.read, fd, 65536):
        typed.put_nowait(chunk)
    typed.put_nowait(EOF_KEY)
