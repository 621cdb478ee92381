"""``jetyard shell`` against a real ``jetyard up`` stack on Docker, stdin not a terminal: the
lines piped in run in the session's container (through the gateway's ``startApp``, the app
proxy and the agent's terminal endpoint) and their output comes back; another user is refused
(the session is not theirs), and so is a session that does not run."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jetyard.natsserver import free_port
from tests.e2e.conftest import Jetyard, wait_until
from tests.e2e.test_vfolders import JETYARD, User, admin_of, another_user


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Jetyard]:
    """A stack whose proxy has a port of its own (6022 may be another stack's)."""
    env = {"JETYARD_APPPROXY_PORT": str(free_port())}
    stack = Jetyard(tmp_path / "data", free_port(), "docker", env=env).start()
    yield stack
    stack.stop()


def _shell(user: User, session_id: str, typed: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "JETYARD_ENDPOINT": user.stack.url,
        "JETYARD_ACCESS_KEY": user.access_key,
        "JETYARD_SECRET_KEY": user.secret_key,
    }
    return subprocess.run([JETYARD, "shell", session_id], input=typed, env=env,
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
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "\n42\n" in done.stdout and "\ncafé\n" in done.stdout, done.stdout  # \r\n read as text

    stranger = _shell(another_user(stack), session_id, "id\n")
    assert stranger.returncode == 1 and "no session" in stranger.stderr, stranger.stderr

    me.gql("mutation($id: ID!) { terminateSession(id: $id) { status } }", id=session_id)
