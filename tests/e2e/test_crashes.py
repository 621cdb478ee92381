"""Crashes: the agent killed while its container runs, and ``jetyard up`` killed mid-burst."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from jetyard.runtime.natsserver import free_port
from schemas.ids import new_id, session_id_for
from tests.e2e.conftest import TEST_IMAGE, Jetyard
from tests.e2e.test_session_path import CREATE, SESSION, create, inspect, wait_status


def _restarted(stack: Jetyard, service: str, old_pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if stack.pid_of(service) != old_pid:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"{service} was not restarted")


def test_an_agent_killed_while_its_container_runs_reattaches_and_sees_exits(
    tmp_path: Path,
) -> None:
    stack = Jetyard(
        tmp_path / "data", free_port(), "docker", env={"JETYARD_UP_RESTART_DELAY_S": "3"}
    ).start()
    try:
        created = create(stack, cpu="0.5", memory="32m", command=["sleep", "300"])
        session_id = created["data"]["createSession"]["sessionId"]
        running = wait_status(stack, session_id, {"RUNNING"})
        name = f"jy-{running['kernelIds'][0]}"
        before = inspect(name)
        assert before is not None

        agent = stack.pid_of("agent")
        os.kill(agent, signal.SIGKILL)
        _restarted(stack, "agent", agent)
        time.sleep(3)  # the new agent reconciles
        after = inspect(name)
        assert after is not None and after["Id"] == before["Id"]  # the same container
        session = wait_status(stack, session_id, {"RUNNING"})
        assert [h["status"] for h in session["history"]].count("RUNNING") == 1

        # The container ends while no agent is there to see it.
        agent = stack.pid_of("agent")
        os.kill(agent, signal.SIGKILL)
        subprocess.run(["docker", "kill", name], check=True, capture_output=True)
        _restarted(stack, "agent", agent)
        ended = wait_status(stack, session_id, {"TERMINATED"}, timeout=40)
        assert ended["exitCode"] == 137
    finally:
        stack.stop()


def test_up_killed_during_a_burst_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    stack = Jetyard(data, port, "simulated").start()
    nodes_before = stack.gql("{ nodes { id hostname capacity { cpu } } }")["data"]["nodes"]
    assert len(nodes_before) == 1
    command_ids = [new_id() for _ in range(200)]
    accepted: set[str] = set()

    async def burst() -> None:
        async def one(client: httpx.AsyncClient, command_id: str) -> None:
            body = {
                "query": CREATE,
                "variables": {
                    "input": {
                        "image": TEST_IMAGE,
                        "cpu": "0.01",
                        "memory": "6m",
                        "clientCommandId": command_id,
                    }
                },
            }
            try:
                response = await client.post(f"{stack.url}/graphql", json=body)
                result: dict[str, Any] = response.json()
            except (httpx.HTTPError, ValueError):
                return
            outcome = (result.get("data") or {}).get("createSession") or {}
            if outcome.get("status") == "ACCEPTED":
                accepted.add(command_id)

        limits = httpx.Limits(max_connections=20)
        async with httpx.AsyncClient(timeout=30, limits=limits, auth=stack.auth) as client:
            tasks = [asyncio.create_task(one(client, c)) for c in command_ids]
            while len(accepted) < 40 and not all(t.done() for t in tasks):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            stack.kill()  # SIGKILL, mid-burst
            await asyncio.gather(*tasks)

    asyncio.run(burst())
    assert 40 <= len(accepted) < 200

    again = Jetyard(data, port, "simulated").start()  # same data directory
    try:
        # Every request the client saw accepted exists, once.
        for command_id in accepted:
            session = again.gql(SESSION, id=session_id_for(command_id))["data"]["session"]
            assert session is not None, command_id
            assert [h["status"] for h in session["history"]].count("PENDING") <= 3
        # Clients retry what they did not see answered; the same ids never duplicate.
        for command_id in command_ids:
            retry = again.gql(
                CREATE,
                input={
                    "image": TEST_IMAGE,
                    "cpu": "0.01",
                    "memory": "6m",
                    "clientCommandId": command_id,
                },
            )
            assert "errors" not in retry or "already exists" in retry["errors"][0]["message"]
        listing = again.gql("{ sessions(first: 500) { edges { node { id } } } }")
        ids = [e["node"]["id"] for e in listing["data"]["sessions"]["edges"]]
        assert len(ids) == len(set(ids))
        assert set(ids) == {session_id_for(c) for c in command_ids}
        # The machine is the same node as before: its ledger resumed from the log.
        nodes_after = again.gql("{ nodes { id hostname capacity { cpu } } }")["data"]["nodes"]
        assert nodes_after == nodes_before
    finally:
        again.stop()
