"""A researcher's session end to end: GraphQL → scheduler → agent → Docker → views."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import time
from typing import Any

import websockets

from tests.e2e.conftest import TEST_IMAGE, Jetyard

CREATE = """
mutation($input: CreateSessionInput!) {
  createSession(input: $input) { commandId status code message sessionId seq }
}"""
SESSION = """
query($id: ID!) {
  session(id: $id) {
    id status statusReason exitCode kernelIds nodeIds
    history { status reason seq }
  }
  sessionLogs(id: $id)
}"""
TERMINATE = """
mutation($id: ID!) { terminateSession(id: $id) { status message } }"""
NODES = "{ nodes { id hostname allocations used { cpu memoryBytes gpu } capacity { cpu } } }"


def create(stack: Jetyard, **spec: Any) -> dict[str, Any]:
    return stack.gql(CREATE, input={"image": TEST_IMAGE, **spec})


def wait_status(
    stack: Jetyard, session_id: str, wanted: set[str], timeout: float = 30
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    session: dict[str, Any] = {}
    while time.monotonic() < deadline:
        session = stack.gql(SESSION, id=session_id)["data"]["session"] or {}
        if session.get("status") in wanted:
            return session
        time.sleep(0.2)
    raise AssertionError(f"session {session_id} never reached {wanted}: {session}")


def inspect(container: str) -> dict[str, Any] | None:
    done = subprocess.run(["docker", "inspect", container], capture_output=True, text=True)
    if done.returncode != 0:
        return None
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found[0]


def test_a_session_runs_with_its_limits_and_terminates(jetyard_docker: Jetyard) -> None:
    created = create(jetyard_docker, cpu="0.5", memory="64m", command=["sleep", "300"])
    assert created["data"]["createSession"]["status"] == "ACCEPTED", created
    session_id = created["data"]["createSession"]["sessionId"]

    running = wait_status(jetyard_docker, session_id, {"RUNNING"})
    container = inspect(f"jy-{running['kernelIds'][0]}")
    assert container is not None
    assert container["HostConfig"]["NanoCpus"] == 500_000_000
    assert container["HostConfig"]["Memory"] == 64 << 20
    busy = jetyard_docker.gql(NODES)["data"]["nodes"]
    assert [n["used"]["cpu"] for n in busy] == ["0.5"]

    stopped = jetyard_docker.gql(TERMINATE, id=session_id)
    assert stopped["data"]["terminateSession"]["status"] == "ACCEPTED", stopped
    ended = wait_status(jetyard_docker, session_id, {"TERMINATED"})
    history = [(h["status"], h["reason"]) for h in ended["history"]]
    # Admitted and placed by one pass: the placement is its admission (no "admitted" line).
    assert [status for status, _ in history][:4] == [
        "PENDING",
        "SCHEDULED",
        "RUNNING",
        "TERMINATING",
    ]
    assert inspect(f"jy-{running['kernelIds'][0]}") is None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        nodes = jetyard_docker.gql(NODES)["data"]["nodes"]
        if [n["used"]["cpu"] for n in nodes] == ["0"]:
            break
        time.sleep(0.2)
    assert [n["used"]["cpu"] for n in nodes] == ["0"]


def test_a_batch_command_ends_with_its_exit_code_and_output(jetyard_docker: Jetyard) -> None:
    created = create(
        jetyard_docker,
        type="batch",
        cpu="0.5",
        memory="32m",
        command=["sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3"],
    )
    session_id = created["data"]["createSession"]["sessionId"]
    ended = wait_status(jetyard_docker, session_id, {"TERMINATED", "ERROR"})
    assert ended["status"] == "TERMINATED"
    assert ended["exitCode"] == 3
    logs = jetyard_docker.gql(SESSION, id=session_id)["data"]["sessionLogs"]
    assert "to-stdout" in logs and "to-stderr" in logs


def test_a_request_larger_than_any_node_is_refused_naming_the_largest(
    jetyard_docker: Jetyard,
) -> None:
    created = create(jetyard_docker, cpu="1", memory="10000g")
    (error,) = created["errors"]
    assert error["extensions"]["code"] == "too-large"
    assert "of memory even when idle (largest: " in error["message"]


def test_bad_input_is_a_clear_error_and_appends_nothing(jetyard_docker: Jetyard) -> None:
    before = jetyard_docker.gql("{ sessions(first: 500) { edges { cursor } } }")
    negative = create(jetyard_docker, memory="-64m")
    assert "memory must not be negative" in negative["errors"][0]["message"]
    unknown = jetyard_docker.gql(CREATE, input={"image": "no-such-image:1"})
    assert "no-such-image:1" in unknown["errors"][0]["message"]
    typo = jetyard_docker.gql(CREATE, input={"image": TEST_IMAGE, "gpus": "1"})
    assert "gpus" in typo["errors"][0]["message"]
    after = jetyard_docker.gql("{ sessions(first: 500) { edges { cursor } } }")
    assert after == before


def test_the_subscription_streams_every_status_in_order(jetyard_docker: Jetyard) -> None:
    created = create(
        jetyard_docker, type="batch", cpu="0.5", memory="32m", command=["sh", "-c", "exit 0"]
    )
    session_id = created["data"]["createSession"]["sessionId"]

    async def watch() -> list[str]:
        url = jetyard_docker.url.replace("http", "ws") + "/graphql"
        async with websockets.connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
            host = jetyard_docker.url.removeprefix("http://")
            init = {
                "type": "connection_init",
                "payload": jetyard_docker.auth.connection_params(host),
            }
            await ws.send(json.dumps(init))
            assert json.loads(await ws.recv())["type"] == "connection_ack"
            query = "subscription($id: ID!) { sessionStatus(id: $id) { status seq queuePosition } }"
            await ws.send(
                json.dumps(
                    {
                        "id": "1",
                        "type": "subscribe",
                        "payload": {"query": query, "variables": {"id": session_id}},
                    }
                )
            )
            seen: list[tuple[str, int, int | None]] = []
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if message["type"] == "complete":
                    break
                assert message["type"] == "next", message
                change = message["payload"]["data"]["sessionStatus"]
                seen.append((change["status"], change["seq"], change["queuePosition"]))
            # A waiting session's change is pushed again (same seq) when its queue position
            # moves; every other change comes once, in order.
            again = [c for before, c in itertools.pairwise(seen) if c[1] == before[1]]
            assert all(status == "PENDING" for status, _, _ in again), seen
            seqs = [seq for _, seq, _ in seen]
            assert seqs == sorted(seqs), seen  # in order
            return [status for status, _, _ in seen]

    statuses = asyncio.run(watch())
    assert statuses[0] == "PENDING"
    assert statuses[-1] == "TERMINATED"
    assert "SCHEDULED" in statuses and "RUNNING" in statuses
