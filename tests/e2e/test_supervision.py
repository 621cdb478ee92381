"""``jetyard up`` says it is up only when every part is healthy, and supervises them: a
service killed is named, restarted and said to be back; one that crash-loops keeps being
restarted while the rest runs, and ``up`` says plainly it is not up and why. Its own
``nats-server``, killed, is started again on the same store, port and token, and the API
answers again with nothing lost; the token and port are kept in the data directory, so they
are the same after ``up`` is restarted (agents elsewhere rejoin)."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx

from jetyard.runtime.data_dir import ready_file, ready_pid
from jetyard.runtime.natsserver import free_port
from jetyard.runtime.supervisor import SERVICE_ORDER
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until

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


def _ready(stack: Jetyard, service: str) -> bool:
    """The service running now (its pid file) has said it is ready (its ready file)."""
    return ready_pid(ready_file(stack.data_dir, service)) == stack.pid_of(service)


def test_up_is_announced_when_every_part_is_ready_and_a_killed_service_comes_back(
    tmp_path: Path,
) -> None:
    stack = Jetyard(tmp_path / "data", free_port(), "simulated").start()
    banner = stack.wait_output("Jetyard is up")
    # Said once every part was ready: each service's ready file names the process running
    # it, and the gateway answers healthy. The first superadmin was made before.
    assert all(_ready(stack, service) for service in SERVICE_ORDER)
    assert httpx.get(f"{stack.url}/healthz", timeout=5).status_code == 200
    assert stack.output().index("First start: a superadmin was created") < banner
    for service in SERVICE_ORDER:
        assert f"{service} ready" in (stack.data_dir / "logs" / f"{service}.log").read_text()

    scheduler = stack.pid_of("scheduler")
    os.kill(scheduler, signal.SIGKILL)
    killed = stack.wait_output("scheduler was killed by SIGKILL; restarting", after=banner)
    back = stack.wait_output("scheduler is back", after=killed, timeout=60)
    assert stack.pid_of("scheduler") != scheduler
    assert _ready(stack, "scheduler")
    # Why it went down comes with it: the end of its log.
    assert "The end of" in stack.output()[killed:back]
    created = stack.gql(CREATE, input={"image": TEST_IMAGE, "command": ["sleep", "600"]})
    assert created["data"]["createSession"]["status"] == "ACCEPTED", created
    assert stack.stop() == 0
    assert not any(ready_file(stack.data_dir, s).exists() for s in SERVICE_ORDER)


def test_a_crash_looping_service_keeps_up_from_saying_it_is_up_and_the_rest_runs(
    tmp_path: Path,
) -> None:
    # An agent setting it refuses: the agent dies at every start, nothing else does.
    env = {"JETYARD_AGENT_CPU": "-1", "JETYARD_UP_START_TIMEOUT_S": "30"}
    stack = Jetyard(tmp_path / "data", free_port(), "simulated", env=env).start()
    not_up = stack.wait_output("Jetyard is NOT up after", timeout=60)
    said = stack.output()
    assert "Jetyard is up" not in said
    assert re.search(r"agent exited with [1-9]", said), said
    missing = said[not_up:]
    assert "  agent: " in missing and "cpu" in missing  # the part, and its log's reason
    for healthy in (
        "nats-server",
        "projections",
        "tenancy",
        "scheduler",
        "storage",
        "appproxy",
        "gateway",
    ):
        assert f"  {healthy}: " not in missing

    # It keeps restarting the agent, and the rest keeps serving.
    wait_until(lambda: len(re.findall(r"agent exited with", stack.output())) >= 3, "3 deaths")
    assert httpx.get(f"{stack.url}/healthz", timeout=5).status_code == 200
    nodes = stack.gql("{ nodes { id } }")["data"]["nodes"]
    assert nodes == []
    assert "Jetyard is up" not in stack.output()
    assert stack.stop() == 0
