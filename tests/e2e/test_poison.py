"""Hostile events written into a running ``jetyard up`` stack: every service keeps serving, a
valid session created afterwards runs, the quarantine lists what was held, and the stack
stopped and started again on the same data directory comes up healthy."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from events.bus import Bus, connect
from jetyard.runtime.natsserver import free_port
from schemas.ids import new_id
from schemas.settings import NatsSettings
from schemas.subjects import EVENTS_STREAM
from tests.e2e.conftest import TEST_IMAGE, Jetyard
from tests.integration.poison import HOSTILE, write_hostile

CREATE = """
mutation($input: CreateSessionInput!) {
  createSession(input: $input) { status message sessionId }
}"""
STATUS = "query($id: ID!) { session(id: $id) { status statusReason } }"
SERVICES = ("projections", "tenancy", "scheduler", "agent", "storage", "appproxy", "gateway")


def nats_of(stack: Jetyard) -> NatsSettings:
    env = dict(
        line.split("=", 1)
        for line in (stack.data_dir / "nats.env").read_text().splitlines()
        if "=" in line
    )
    return NatsSettings(url=env["JETYARD_NATS_URL"], token=env["JETYARD_NATS_TOKEN"])


async def poison(settings: NatsSettings) -> dict[str, int]:
    """Every hostile kind on a session subject, plus garbage on the subjects the tenancy
    service, the gateway's directory, the agents, storage and the app proxy fold."""
    bus: Bus = await connect(settings, name="e2e-poison")
    try:
        written = {kind: (await write_hostile(bus, kind))[1] for kind in sorted(HOSTILE)}
        broken = ("domain", "agent", "node", "vfolder")
        for subject in (f"ev.{kind}.{new_id()}" for kind in broken):
            ack = await bus.js.publish(subject, b'{"broken": ', stream=EVENTS_STREAM)
            written[subject] = int(ack.seq)
        return written
    finally:
        await bus.close()


def wait_for(stack: Jetyard, session_id: str, wanted: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        found = stack.gql(STATUS, id=session_id)["data"]["session"]
        status = found["status"] if found else ""
        if status in wanted:
            return status
        time.sleep(0.3)
    raise AssertionError(f"session {session_id} is {status}, not one of {wanted}")


def services_alive(stack: Jetyard) -> None:
    for service in SERVICES:
        pid = stack.pid_of(service)
        Path(f"/proc/{pid}").stat()  # raises if the service died


def test_hostile_events_stop_nothing_and_survive_a_restart(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    stack = Jetyard(data, port, "simulated").start()
    pids = {service: stack.pid_of(service) for service in SERVICES}
    written = asyncio.run(poison(nats_of(stack)))

    created: dict[str, Any] = stack.gql(
        CREATE, input={"image": TEST_IMAGE, "type": "batch", "command": ["true"], "cpu": "0.5"}
    )["data"]["createSession"]
    assert created["status"] in {"ACCEPTED", "PENDING"}, created
    wait_for(stack, created["sessionId"], {"RUNNING", "TERMINATED"}, timeout=30)

    services_alive(stack)
    assert {s: stack.pid_of(s) for s in SERVICES} == pids  # none was restarted
    deadline = time.monotonic() + 15  # /healthz reads the quarantine every few seconds
    while True:
        health = httpx.get(f"{stack.url}/healthz", timeout=5)
        if health.json().get("status") == "degraded" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    listed = stack.gql("{ quarantine(first: 500) { seq consumer subject } }")["data"]
    held = {row["seq"] for row in listed["quarantine"]}
    for kind in ("wrong-types", "missing-fields", "not-json", "invalid-utf8"):
        assert written[kind] in held, kind

    assert stack.stop() == 0
    again = Jetyard(data, port, "simulated").start()  # same data directory: comes up healthy
    assert again.gql(STATUS, id=created["sessionId"])["data"]["session"] is not None
    assert again.stop() == 0
