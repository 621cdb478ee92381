"""Two ``jetyard up`` on one machine and one Docker engine (their own data directories,
gateway and NATS ports): each runs its own session side by side, neither agent's reconcile
pass takes the other's container, and each ends only its own.

Docker is required: without it this test fails, it never skips.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from jetyard.runtime.natsserver import free_port
from services.node.backend import LABEL_SESSION
from tests.e2e.conftest import Jetyard
from tests.e2e.test_session_path import SESSION, TERMINATE, create, wait_status

SIDE_BY_SIDE_S = 15.0  # several reconcile passes (JETYARD_AGENT_RESYNC_INTERVAL_S below)


def running_containers(session_id: str) -> list[str]:
    listed = subprocess.run(
        [
            "docker",
            "ps",
            "--quiet",
            "--no-trunc",
            "--filter",
            f"label={LABEL_SESSION}={session_id}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


@pytest.mark.timeout(300)
def test_two_stacks_on_one_docker_engine_keep_to_their_own_sessions(tmp_path: Path) -> None:
    env = {"JETYARD_AGENT_RESYNC_INTERVAL_S": "2"}
    stacks = [
        Jetyard(tmp_path / name / "data", free_port(), "docker", env=env).start()
        for name in ("first", "second")
    ]
    assert stacks[0].nats_env() != stacks[1].nats_env()  # their own NATS, port and token
    nodes = [{n["id"] for n in s.gql("{ nodes { id } }")["data"]["nodes"]} for s in stacks]
    assert len(nodes[0]) == len(nodes[1]) == 1 and not nodes[0] & nodes[1]

    sessions: list[str] = []
    for stack in stacks:
        created = create(stack, cpu="0.1", memory="32m", command=["sleep", "600"])
        assert created["data"]["createSession"]["status"] == "ACCEPTED", created
        sessions.append(created["data"]["createSession"]["sessionId"])
    for stack, session_id in zip(stacks, sessions, strict=True):
        wait_status(stack, session_id, {"RUNNING"}, timeout=60)
    containers = [running_containers(session_id) for session_id in sessions]
    assert all(len(found) == 1 for found in containers), containers

    side_by_side = time.monotonic() + SIDE_BY_SIDE_S
    while time.monotonic() < side_by_side:
        for stack, session_id, container in zip(stacks, sessions, containers, strict=True):
            session = stack.gql(SESSION, id=session_id)["data"]["session"]
            assert session["status"] == "RUNNING", session
            assert running_containers(session_id) == container  # the same one, still running
        time.sleep(1.0)

    terminate(stacks[0], sessions[0])
    assert running_containers(sessions[1]) == containers[1]  # the other stack's runs on
    terminate(stacks[1], sessions[1])
    for stack in stacks:
        assert stack.stop() == 0


def terminate(stack: Jetyard, session_id: str) -> None:
    ended = stack.gql(TERMINATE, id=session_id)
    assert ended["data"]["terminateSession"]["status"] == "ACCEPTED", ended
    wait_status(stack, session_id, {"TERMINATED"}, timeout=60)
    assert running_containers(session_id) == []
