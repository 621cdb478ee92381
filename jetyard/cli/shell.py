"""``jetyard shell SESSION [-- CMD...]``: a shell, or one command, in a running session's main
kernel, through the app proxy (``startApp(session, "terminal")``, then a WebSocket to the URL
it returns, its token on the handshake). The session is named by its id, its name or a unique
id prefix (``Sessions.resolve``). Signs in as the other user commands do
(``jetyard.sdk.config``: options, ``JETYARD_*``, then what ``jetyard login`` kept).

With ``-- CMD...``, or with stdin not a terminal (the shell then reads its commands from
stdin), there is no TTY (``?tty=0``, the exec protocol of ``schemas/terminal_tokens.py``):
stdin is relayed to the end, the command's stdout and stderr come out apart, unchanged, and
the exit status is the command's. Otherwise a TTY: stdin in raw mode (restored on exit), its
size sent at the start and on every SIGWINCH, exit status 0 when the shell ends. Either way 1
when the gateway refuses or the session ends meanwhile, 2 for a usage error."""

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
from collections.abc import Callable, Iterator
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection, connect

from jetyard.cli.common import REFUSED, USAGE, add_credential_options, credentials
from jetyard.cli.sessions_args import SESSION_HELP
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.errors import JetyardError
from schemas.terminal_tokens import (
    EOF_MESSAGE,
    NO_TTY,
    STDERR,
    TERMINAL,
    ExecError,
    ended_of,
    exec_message,
    output_of,
    resize_message,
)

START_APP = """mutation($session: ID!, $app: String!) {
  startApp(sessionId: $session, app: $app) { url }
}"""


def add_parser(sub: Any) -> None:
    shell = sub.add_parser(
        "shell",
        help="a shell in a running session; -- CMD...: run one command, exit with its code",
        description="A shell on a TTY in the session's main kernel. With `-- CMD...`, or with "
        "stdin not a terminal, no TTY: the command (or the shell reading stdin) runs with its "
        "stdout and stderr apart, and jetyard exits with its exit code.",
    )
    shell.add_argument("session", help=SESSION_HELP)
    shell.add_argument("cmd", nargs="*", help="the command (after --)")
    shell.add_argument(
        "--no-stdin", "-n", action="store_true", help="with a command: leave stdin unread"
    )
    add_credential_options(shell)


def run(args: argparse.Namespace) -> int:
    try:
        signed_in = credentials(args)
    except ConfigError as exc:
        print(f"jetyard shell: {exc}", file=sys.stderr)
        return USAGE
    try:
        return asyncio.run(_run(args, signed_in))
    except ExecError as exc:
        print(f"jetyard shell: {exc}", file=sys.stderr)
        return USAGE
    except JetyardError as exc:
        print(f"jetyard shell: {exc}", file=sys.stderr)
        return REFUSED
    except (OSError, websockets.exceptions.WebSocketException) as exc:
        print(f"jetyard shell: the terminal did not open: {exc}", file=sys.stderr)
        return REFUSED


async def _run(args: argparse.Namespace, signed_in: Credentials) -> int:
    command: list[str] | None = list(args.cmd) if args.cmd else None
    interactive = command is None and sys.stdin.isatty()
    first = None if interactive else exec_message(command or [])
    async with AsyncClient.from_config(signed_in) as client:
        session_id = await client.sessions.resolve(args.session)
        data = await client.graphql(START_APP, {"session": session_id, "app": TERMINAL})
    url = str(data["startApp"]["url"]).replace("http", "ws", 1)
    if interactive:
        cols, rows = shutil.get_terminal_size()
        url += f"&cols={cols}&rows={rows}"
    else:
        url += f"&tty={NO_TTY}"
    async with connect(url, max_size=None) as ws:
        if first is not None:
            await ws.send(first)
            return await _command(ws, read_stdin=not (args.no_stdin and command))
        with _raw(sys.stdin.fileno()):
            await _relay(ws)
    if ws.close_code not in (1000, None):
        reason = ws.close_reason or f"closed with code {ws.close_code}"
        print(f"\r\njetyard shell: {reason}", file=sys.stderr)
        return REFUSED
    return 0


async def _command(ws: ClientConnection, *, read_stdin: bool) -> int:
    """No TTY: stdin to the command until its end, its output to ours; its exit code."""
    typed: asyncio.Queue[bytes | str] = asyncio.Queue()
    stop_reading: Callable[[], object] = _nothing
    if read_stdin:
        stop_reading = _read_stdin(typed, EOF_MESSAGE)
    else:
        typed.put_nowait(EOF_MESSAGE)

    async def inbound() -> None:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            while True:
                await ws.send(await typed.get())

    sending = asyncio.create_task(inbound())
    try:
        with contextlib.suppress(websockets.exceptions.ConnectionClosed):
            async for message in ws:
                if isinstance(message, bytes):
                    stream, data = output_of(message)
                    out = sys.stderr if stream == STDERR else sys.stdout
                    out.buffer.write(data)
                    out.buffer.flush()
                    continue
                ended = ended_of(message)
                if ended is not None and ended.exit_code is not None:
                    return ended.exit_code
                if ended is not None:
                    print(f"jetyard shell: {ended.error}", file=sys.stderr)
                    return REFUSED
    finally:
        sending.cancel()
        stop_reading()
    reason = ws.close_reason or f"closed with code {ws.close_code}"
    print(f"jetyard shell: the command's end was not said ({reason})", file=sys.stderr)
    return REFUSED


@contextlib.contextmanager
def _raw(fd: int) -> Iterator[None]:
    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


async def _relay(ws: ClientConnection) -> None:
    """A TTY: what is typed goes in (with resizes), what the terminal shows comes out."""
    loop = asyncio.get_running_loop()
    typed: asyncio.Queue[bytes | str] = asyncio.Queue()
    stop_reading = _read_stdin(typed, None)

    def resized() -> None:
        cols, rows = shutil.get_terminal_size()
        typed.put_nowait(resize_message(cols, rows))

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
        stop_reading()
        loop.remove_signal_handler(signal.SIGWINCH)


def _read_stdin(typed: asyncio.Queue[bytes | str], at_end: str | None) -> Callable[[], object]:
    """Put what stdin gives in ``typed`` (then ``at_end``, if any); the function that stops
    reading."""
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno()

    def readable() -> None:
        chunk = os.read(fd, 65536)
        if chunk:
            typed.put_nowait(chunk)
            return
        loop.remove_reader(fd)
        if at_end is not None:
            typed.put_nowait(at_end)

    async def read_file() -> None:
        while chunk := await asyncio.to_thread(os.read, fd, 65536):
            typed.put_nowait(chunk)
        if at_end is not None:
            typed.put_nowait(at_end)

    try:
        loop.add_reader(fd, readable)
    except PermissionError:  # a regular file or /dev/null: no readiness to wait for
        reading = asyncio.create_task(read_file())
        return reading.cancel
    return lambda: loop.remove_reader(fd)


def _nothing() -> None:
    pass
