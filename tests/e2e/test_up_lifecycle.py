"""What ``jetyard up`` leaves running when it stops, as a user sees it on the real Docker engine:
Ctrl-C stops Jetyard and says which sessions' containers keep running and how to end them; the
next ``up`` takes the session up again, and ``up --stop-sessions`` ends it through the log when
it stops (no container of the stack is left, and the session's final reason says who ended it)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from jetyard.runtime.natsserver import free_port
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until

CREATE = """mutation($input: CreateSessionInput!) {
    createSession(input: $input) { status message sessionId } }"""
SESSION = "query($id: ID!) { session(id: $id) { status statusReason } }"


def _containers(cluster_id: str) -> list[str]:
    listed = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=jetyard.cluster_id={cluster_id}"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    return listed.stdout.split()


def _status(stack: Jetyard, session_id: str) -> dict[str, str]:
    found: dict[str, str] = stack.gql(SESSION, id=session_id)["data"]["session"] or {}
    return found


@pytest.mark.timeout(600)
def test_ctrl_c_says_what_keeps_running_and_stop_sessions_ends_it(tmp_path: Path) -> None:
    stack = Jetyard(tmp_path / "data", free_port(), "docker").start(timeout=150)
    made = stack.gql(CREATE, input={"image": TEST_IMAGE, "command": ["sleep", "3600"]})
    session_id = made["data"]["createSession"]["sessionId"]
    wait_until(lambda: _status(stack, session_id).get("status") == "RUNNING", "RUNNING")
    cluster_id = (stack.data_dir / "cluster.id").read_text().strip()
    assert stack.stop() == 0
    said = stack.output()
    assert "1 session container(s) keep running (1 session(s): " + session_id[:8] in said
    assert "--stop-sessions" in said.split("keep running", 1)[1]
    assert len(_containers(cluster_id)) == 1  # it did keep running

    stack.args = ("--stop-sessions",)
    mark = len(stack.output())
    stack.start(timeout=150)
    assert _status(stack, session_id)["status"] == "RUNNING"  # taken up again
    assert stack.stop() == 0
    assert "ending 1 session(s) (--stop-sessions)..." in stack.output()[mark:]
    assert "container(s) keep running" not in stack.output()[mark:]
    assert _containers(cluster_id) == []

    stack.args = ()
    stack.start(timeout=150)
    try:
        ended = _status(stack, session_id)
        assert ended["status"] == "TERMINATED", ended
        assert "jetyard-up" in ended["statusReason"] and "--stop-sessions" in ended["statusReason"]
    finally:
        stack.stop()
