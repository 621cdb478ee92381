"""``jetyard up`` supervises its own ``nats-server``: killed, it is started again on the same
store, port and token, and the API answers again with nothing lost; the token is kept in the
data directory, so it is the same after ``up`` is restarted (agents elsewhere rejoin)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx

from jetyard.natsserver import free_port
from tests.e2e.conftest import TEST_IMAGE, Jetyard

CREATE = """
mutation($input: CreateSessionInput!) { createSession(input: $input) { status sessionId } }"""
STATUS = "query($id: ID!) { session(id: $id) { status } }"


def healthy_again(stack: Jetyard, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{stack.url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"not healthy again within {timeout}s")


def test_a_killed_nats_server_is_restarted_and_nothing_is_lost(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    stack = Jetyard(data, port, "simulated").start()
    created = stack.gql(CREATE, input={"image": TEST_IMAGE, "command": ["sleep", "600"]})
    session_id = created["data"]["createSession"]["sessionId"]
    token = (data / "nats.token").read_text()
    assert oct((data / "nats.token").stat().st_mode & 0o777) == "0o600"

    pid = int((data / "nats" / "nats-server.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    started = time.monotonic()
    healthy_again(stack, timeout=30)
    assert time.monotonic() - started < 30
    assert int((data / "nats" / "nats-server.pid").read_text()) != pid  # a new server
    assert stack.gql(STATUS, id=session_id)["data"]["session"] is not None  # nothing lost
    again = stack.gql(CREATE, input={"image": TEST_IMAGE, "command": ["true"]})
    assert again["data"]["createSession"]["sessionId"]
    assert stack.stop() == 0

    restarted = Jetyard(data, port, "simulated").start()
    assert (data / "nats.token").read_text() == token  # the same credentials
    assert f"JETYARD_NATS_TOKEN={token.strip()}" in (data / "nats.env").read_text()
    assert restarted.stop() == 0
