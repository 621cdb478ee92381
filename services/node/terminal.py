"""The kernels' terminals on this node (Docker backend): ``/kernels/<kernel id>/pty?cols=&rows=``
is a WebSocket to a shell in the kernel's container, run by the engine's exec API with a TTY,
so nothing is needed in the image but ``/bin/sh`` (``bash`` when it has one). Reads and writes
no subjects; talks to the local engine only.

Only the app proxy opens one: a request must carry a terminal token (``schemas/
terminal_tokens.py``, header ``X-Jetyard-Terminal-Token``) signed with the terminal key and
naming that kernel, not used before (401 without, or used again; 403 for another kernel; 404
when the kernel has no running container here). ``?tty=0`` runs one command without a TTY
instead (its first frame; none: the shell reading stdin), its stdout and stderr apart, and
ends with its exit code (the exec protocol of ``schemas/terminal_tokens.py``); when its client
goes, its stdin is closed and what is left of it killed ``HANG_UP_GRACE_S`` later. With a TTY,
output goes out as binary frames (a frame may end inside a UTF-8 character);
a text frame ``{"resize": [cols, rows]}`` resizes the TTY, any other frame is typed. When the
shell ends the WebSocket closes (1000); when the WebSocket closes the shell is sent Ctrl-C then
Ctrl-D (the engine keeps an exec running after its client has gone), and whatever of the
terminal still runs ``HANG_UP_GRACE_S`` later (a program that ignores both, even if the shell
itself has ended) is killed: every
process of the terminal carries ``JETYARD_TERMINAL=<its id>`` in its environment, and a second
exec kills the processes that do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Iterator

import aiodocker
import uvicorn
from aiodocker.containers import DockerContainer
from aiodocker.execs import Exec
from aiodocker.stream import Stream
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from httpserver.server import listening
from schemas.ids import new_id
from schemas.terminal_tokens import (
    EOF_MESSAGE,
    HEADER,
    NO_TTY,
    ExecError,
    TerminalTokenError,
    UsedTokens,
    error_message,
    exec_of,
    exit_message,
    output_frame,
    resize_of,
    size_of,
    verify,
)
from services.node.backend import Backend
from services.node.backend_docker import DockerBackend
from services.node.settings import AgentSettings

log = logging.getLogger(__name__)

SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash; else exec sh; fi"]
ENV = {"TERM": "xterm-256color", "LANG": "C.UTF-8"}
HANG_UP = b"\x03\x04"
"""Typed when the client goes: end whatever runs in the foreground, then the shell."""
HANG_UP_GRACE_S = 2.0
MARKER = "JETYARD_TERMINAL"
KILL_MARKED = (
    'for d in /proc/[0-9]*; do tr "\\0" "\\n" < "$d/environ" 2>/dev/null '
    '| grep -qx "$1" && kill -9 "${d#/proc/}" 2>/dev/null; done; true'
)
"""``sh -c KILL_MARKED sh JETYARD_TERMINAL=<id>``: kill every process whose environment
holds that line (the killer's own does not)."""
FIRST_FRAME_S = 10.0
"""How long a terminal without a TTY waits for its command."""
QUIET_S = 1.0
"""Output quiet this long, the engine is asked whether the command has ended."""
LAST_WORD_S = 10.0
"""How long it waits, once it has said the command's end, for its client to go."""


async def pty(websocket: WebSocket) -> None:
    backend: DockerBackend = websocket.app.state.backend
    key: bytes = websocket.app.state.key
    used: UsedTokens = websocket.app.state.used
    kernel_id = websocket.path_params["kernel"]
    try:
        now = time.time()
        claims = verify(key, websocket.headers.get(HEADER, ""), now=now)
        used.spend(claims, now=now)
    except TerminalTokenError as exc:
        await _deny(websocket, 401, str(exc))
        return
    if claims.kernel != kernel_id:
        await _deny(websocket, 403, "this terminal token is for another kernel")
        return
    found = [
        c for c in await backend.containers() if c.kernel_id == kernel_id and c.status == "running"
    ]
    if not found:
        await _deny(websocket, 404, f"kernel {kernel_id} does not run here")
        return
    container = backend.docker.containers.container(found[0].container_id)
    terminal_id = new_id()
    marker, environment = f"{MARKER}={terminal_id}", {**ENV, MARKER: terminal_id}
    if websocket.query_params.get("tty") == NO_TTY:
        await _command(websocket, container, environment, marker)
        return
    try:
        shell = await container.exec(SHELL, stdin=True, tty=True, environment=environment)
    except aiodocker.DockerError as exc:
        await _deny(websocket, 502, f"the engine refused a shell: {exc.message}")
        return
    await websocket.accept()
    size = size_of(websocket.query_params.get("cols"), websocket.query_params.get("rows"))
    async with _started(shell) as stream:
        if size is not None:
            await _resize(shell, *size, tries=20)
        client_left = await _relay(websocket, shell, stream)
        if client_left:
            with contextlib.suppress(RuntimeError, OSError):
                await stream.write_in(HANG_UP)
    if client_left:
        await _hang_up(shell, container, marker)
    with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):  # gone already
        await websocket.close(code=1000)


STREAM_GONE = (RuntimeError, OSError, AssertionError)
"""What aiodocker's exec stream raises once the engine has closed it: a write or a close then
finds its connection released (aiodocker asserts it is there)."""


@contextlib.asynccontextmanager
async def _started(run: Exec) -> AsyncIterator[Stream]:
    """The exec's stream, closed at the end however far the engine got in closing it."""
    stream = run.start()
    await stream.__aenter__()
    try:
        yield stream
    finally:
        with contextlib.suppress(*STREAM_GONE):
            await stream.close()


async def _first_to_end(inbound: Awaitable[None], outbound: Awaitable[None]) -> bool:
    """Run both halves of a relay until one ends, then stop the other; whether the client's
    half (``inbound``) ended first."""
    client = asyncio.ensure_future(inbound)
    tasks = {client, asyncio.ensure_future(outbound)}
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return client in done


async def _relay(websocket: WebSocket, shell: Exec, stream: Stream) -> bool:
    """Relay until one side ends; whether it was the client."""

    async def inbound() -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text is not None:
                    size = resize_of(text)
                    if size is not None:
                        await _resize(shell, *size)
                        continue
                    with contextlib.suppress(*STREAM_GONE):  # the shell ended: outbound says so
                        await stream.write_in(text.encode())
                else:
                    with contextlib.suppress(*STREAM_GONE):
                        await stream.write_in(message.get("bytes") or b"")

    async def outbound() -> None:
        while (message := await stream.read_out()) is not None:
            await websocket.send_bytes(message.data)

    return await _first_to_end(inbound(), outbound())


async def _command(
    websocket: WebSocket, container: DockerContainer, environment: dict[str, str], marker: str
) -> None:
    """Without a TTY: the command of the first frame (none: the shell, reading stdin), its
    stdout and stderr apart, then its exit code (``schemas.terminal_tokens``)."""
    await websocket.accept()
    try:
        async with asyncio.timeout(FIRST_FRAME_S):
            argv = exec_of(await websocket.receive_text()) or SHELL
        run = await container.exec(argv, stdin=True, tty=False, environment=environment)
    except (ExecError, TimeoutError) as exc:
        await _end(websocket, error_message(str(exc) or "no command came"))
        return
    except aiodocker.DockerError as exc:
        await _end(websocket, error_message(f"the engine refused the command: {exc.message}"))
        return
    except (WebSocketDisconnect, KeyError, RuntimeError):  # gone, or sent bytes first
        await _end(websocket, error_message('the first frame must be {"exec": [...]}'))
        return
    async with _started(run) as stream:
        client_left = await _relay_command(websocket, run, stream)
        if client_left:
            _close_stdin(stream)
    if client_left:
        await _hang_up(run, container, marker)
        return
    code = await _exit_code(run)
    ended = "the engine never said how the command ended"
    await _end(websocket, error_message(ended) if code is None else exit_message(code))


async def _relay_command(websocket: WebSocket, run: Exec, stream: Stream) -> bool:
    """Relay until the command's output ends or the client goes; whether it was the client."""

    async def inbound() -> None:
        typing = True
        with contextlib.suppress(WebSocketDisconnect):
            while True:  # after the end of stdin, only to see the client go
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text = message.get("text")
                if text == EOF_MESSAGE and typing:
                    typing = False
                    _close_stdin(stream)
                elif typing:
                    try:
                        await stream.write_in(
                            text.encode() if text else message.get("bytes") or b""
                        )
                    except STREAM_GONE:  # the command has ended: its end says so
                        typing = False

    async def outbound() -> None:
        # The output ends when the engine closes the stream, but stdin the command never read
        # can hold it open after the command has ended: a quiet stream asks the engine.
        reading = asyncio.ensure_future(stream.read_out())
        try:
            while True:
                done, _ = await asyncio.wait({reading}, timeout=QUIET_S)
                if not done:
                    if await _ended(run, 0):
                        return
                    continue
                message = reading.result()
                if message is None:
                    return
                await websocket.send_bytes(output_frame(message.stream, message.data))
                reading = asyncio.ensure_future(stream.read_out())
        finally:
            reading.cancel()

    return await _first_to_end(inbound(), outbound())


def _close_stdin(stream: Stream) -> None:
    """End the command's stdin, keeping its output coming: half-close the engine's hijacked
    connection, as ``docker exec -i`` does (aiodocker's own ``close`` closes both ways)."""
    response = stream._resp
    transport = None if response is None or response.connection is None else (
        response.connection.transport
    )  # fmt: skip
    if transport is not None and transport.can_write_eof():
        transport.write_eof()


async def _exit_code(run: Exec) -> int | None:
    """The command's exit code; None when the engine does not say (the container went)."""
    for _ in range(50):  # the output ends as the process does; the engine may say so later
        try:
            found = await run.inspect()
        except aiodocker.DockerError:
            return None
        if not found.get("Running", False) and found.get("ExitCode") is not None:
            return int(found["ExitCode"])
        await asyncio.sleep(0.05)
    return None


async def _end(websocket: WebSocket, last: str) -> None:
    """Say the end, then read (and drop) what the client still sends until it goes, for
    ``LAST_WORD_S`` at most: a socket closed with input unread is reset, and the reset can
    lose the end said just before it (stdin the command never read)."""
    with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect, TimeoutError):
        await websocket.send_text(last)
        async with asyncio.timeout(LAST_WORD_S):
            while (await websocket.receive())["type"] != "websocket.disconnect":
                pass
    with contextlib.suppress(RuntimeError, OSError, WebSocketDisconnect):  # gone already
        await websocket.close(code=1000)


async def _ended(shell: Exec, within_s: float) -> bool:
    """Whether the shell's exec ends within ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            if not (await shell.inspect()).get("Running", False):
                return True
        except aiodocker.DockerError:
            return True  # the container is gone, and the exec with it
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.1)


async def _hang_up(run: Exec, container: DockerContainer, marker: str) -> None:
    """After the client went: give the terminal's own process ``HANG_UP_GRACE_S`` to end,
    then kill whatever of the terminal is left, whether that process ended or not: a shell
    that ended on the hang-up leaves behind a program that ignores it (a ``sleep`` under
    ``trap "" HUP``), which must not outlive the terminal."""
    await _ended(run, HANG_UP_GRACE_S)
    await _kill_marked(container, marker)


async def _kill_marked(container: DockerContainer, marker: str) -> None:
    """Kill what is left of a terminal whose client has gone."""
    try:
        killer = await container.exec(["/bin/sh", "-c", KILL_MARKED, "sh", marker])
        await killer.start(detach=True)
    except aiodocker.DockerError as exc:
        log.warning("terminal: could not end what a closed terminal left: %s", exc.message)
    else:
        log.info("terminal: killed whatever a closed terminal left running (%s)", marker)


async def _resize(shell: Exec, cols: int, rows: int, *, tries: int = 1) -> None:
    # Right after the start the engine may not have the process yet (409/500): try again.
    for attempt in range(tries):
        try:
            await shell.resize(w=cols, h=rows)
            return
        except aiodocker.DockerError as exc:
            if attempt == tries - 1:
                log.info("terminal: resize to %dx%d refused: %s", cols, rows, exc.message)
                return
            await asyncio.sleep(0.05)


async def _deny(websocket: WebSocket, status: int, message: str) -> None:
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(PlainTextResponse(message, status))
    else:
        await websocket.close(code=4000 + status)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # signals are the agent's: its entry point stops everything, this server too


def create_app(backend: DockerBackend, key: bytes) -> Starlette:
    app = Starlette(routes=[WebSocketRoute("/kernels/{kernel}/pty", pty)])
    app.state.backend, app.state.key, app.state.used = backend, key, UsedTokens()
    return app


@contextlib.asynccontextmanager
async def serving(backend: Backend, settings: AgentSettings) -> AsyncIterator[str]:
    """Serve the terminals for the time of the block; yields their base URL (``ws://host:port``,
    what ``AgentRegistered.terminal_url`` says), or "" when this agent serves none (no
    terminal key, or not the Docker backend)."""
    if settings.terminal_key is None or not isinstance(backend, DockerBackend):
        yield ""
        return
    app = create_app(backend, settings.terminal_key.get_secret_value().encode())
    config = uvicorn.Config(
        app, host=settings.terminal_host, port=settings.terminal_port, lifespan="off",
        access_log=False, log_level="warning", ws="websockets-sansio",
    )  # fmt: skip
    server = _Server(config)
    async with listening(server, "the terminal endpoint"):
        port = int(server.servers[0].sockets[0].getsockname()[1])
        host = settings.terminal_host
        if host in ("0.0.0.0", "::", ""):
            host = settings.hostname
        if ":" in host:
            host = f"[{host}]"
        url = f"ws://{host}:{port}"
        log.info("agent: kernels' terminals at %s", url)
        yield url
