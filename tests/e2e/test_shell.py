"""``jetyard shell`` against a real ``jetyard up`` stack on Docker. Stdin not a terminal: the
lines piped in run in the session's container (through the gateway's ``startApp``, the app
proxy and the agent's terminal endpoint) and their output comes back, clean (no TTY); another
user is refused (the session is not theirs), and so is a session that does not run. On a
terminal of its own: Ctrl-C reaches the session's foreground program, a window resize reaches
``stty size``."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.appproxy_support import running_stack
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.test_vfolders import JETYARD, User, admin_of, another_user


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Jetyard]:
    yield from running_stack(tmp_path)


def _env(user: User) -> dict[str, str]:
    """The CLI's environment, signed in as ``user``."""
    return {
        **os.environ,
        "JETYARD_ENDPOINT": user.stack.url,
        "JETYARD_ACCESS_KEY": user.access_key,
        "JETYARD_SECRET_KEY": user.secret_key,
    }


def _shell(user: User, session_id: str, typed: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([JETYARD, "shell", session_id], input=typed, env=_env(user),
                          capture_output=True, text=True, timeout=60)  # fmt: skip


def test_lines_piped_into_jetyard_shell_run_in_the_session(stack: Jetyard) -> None:
    me = admin_of(stack)
    session_id = me.start_session("sleep 600", [])
    seen: dict[str, Any] = {}

    def running() -> bool:
        nonlocal seen
        seen = me.gql("query($id: ID!) { session(id: $id) { status } }", id=session_id)
        return (seen["data"]["session"] or {}).get("status") == "RUNNING"

    wait_until(running, f"session {session_id} RUNNING ({seen})", 90)

    done = _shell(me, session_id, "echo $((6*7))\necho caf\u00e9\n")
    assert (done.returncode, done.stdout) == (0, "42\ncafé\n"), done.stderr  # no TTY: clean

    _interactive(me, session_id)

    stranger = _shell(another_user(stack), session_id, "id\n")
    assert stranger.returncode == 1 and "no session" in stranger.stderr, stranger.stderr

    me.gql("mutation($id: ID!) { terminateSession(id: $id) { status } }", id=session_id)


def _interactive(user: User, session_id: str) -> None:
    """``jetyard shell`` on a terminal of its own (a pty): raw mode passes Ctrl-C to the
    session instead of ending the client, and a window resize reaches ``stty size``."""
    env = _env(user)
    pid, master = pty.fork()
    if pid == 0:  # the child: its terminal 24x80, then the CLI
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        os.execve(JETYARD, [JETYARD, "shell", session_id], env)
    try:
        screen = _Screen(master)
        screen.until(b"# ")  # the prompt: the shell reads lines from here on
        os.write(master, b"stty size\n")
        screen.until(b"24 80")
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        time.sleep(0.5)  # SIGWINCH, then the resize frame, before the next line
        os.write(master, b"stty size\n")
        screen.until(b"30 100")
        os.write(master, b"sleep 600; echo not-interrupted\n")
        time.sleep(1)
        os.write(master, b"\x03")
        os.write(master, b"echo still-$((20+22))\n")
        assert b"\nnot-interrupted" not in screen.until(b"\nstill-42")  # output, not echo
        os.write(master, b"exit\n")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, screen.seen
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(master)


class _Screen:
    """The pty's other side, as a terminal emulator: what was shown, and the answer to the
    shell's cursor position query (busybox ash asks before each prompt and reads the reply)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.seen = fd, b""

    def until(self, needle: bytes, timeout_s: float = 30.0) -> bytes:
        deadline = time.monotonic() + timeout_s
        while needle not in self.seen:
            left = deadline - time.monotonic()
            assert left > 0, f"waited for {needle!r}; the terminal shows {self.seen[-500:]!r}"
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                shown = os.read(self.fd, 65536)
                self.seen += shown
                for _ in range(shown.count(b"\x1b[6n")):
                    os.write(self.fd, b"\x1b[1;1R")
        return self.seen
