"""Preemption as an operator and two researchers meet it, through the GraphQL API of a running
``jetyard up`` with real containers: a resource group set to preempt, a low-priority session
holding the machine, a high-priority one that needs it. The low one's container is stopped, its
end names the session it made room for, and the high one runs in its place."""

from __future__ import annotations

from tests.e2e.conftest import Jetyard
from tests.e2e.test_session_path import create, inspect, wait_status

MODIFY = """
mutation { modifyResourceGroup(name: "default", preemption: true, preemptionGraceSeconds: 0) {
  status message } }"""
GROUP = "{ resourceGroups { name preemption preemptionGraceSeconds preemptAcrossDomains } }"
NODES = "{ nodes { capacity { cpu } } }"
HISTORY = """
query($id: ID!) { session(id: $id) { status statusReason kernelIds history { status reason } } }"""


def test_a_higher_priority_session_preempts_a_running_one(jetyard_docker: Jetyard) -> None:
    stack = jetyard_docker
    changed = stack.gql(MODIFY)["data"]["modifyResourceGroup"]
    assert changed["status"] == "ACCEPTED", changed
    groups = stack.gql(GROUP)["data"]["resourceGroups"]
    assert {"name": "default", "preemption": True, "preemptionGraceSeconds": 0,
            "preemptAcrossDomains": False} in groups  # fmt: skip
    cpu = stack.gql(NODES)["data"]["nodes"][0]["capacity"]["cpu"]  # the whole machine
    low = create(stack, cpu=cpu, memory="32m", priority=1, command=["sleep", "600"])
    low_id = low["data"]["createSession"]["sessionId"]
    wait_status(stack, low_id, {"RUNNING"}, timeout=60)
    (kernel_id,) = stack.gql(HISTORY, id=low_id)["data"]["session"]["kernelIds"]
    container = f"jy-{kernel_id}"
    assert (inspect(container) or {}).get("State", {}).get("Running") is True

    high = create(stack, cpu=cpu, memory="32m", priority=10, command=["sleep", "600"])
    high_id = high["data"]["createSession"]["sessionId"]

    ended = wait_status(stack, low_id, {"TERMINATED"}, timeout=60)
    assert ended["statusReason"].startswith(
        f"preempted: stopped to make room for session {high_id}"
    ), ended
    history = stack.gql(HISTORY, id=low_id)["data"]["session"]["history"]
    stopping = [h for h in history if h["status"] == "TERMINATING"]
    assert stopping and "priority 10 over 1" in stopping[0]["reason"]
    wait_status(stack, high_id, {"RUNNING"}, timeout=60)
    state = (inspect(container) or {}).get("State", {})
    assert state.get("Running") is not True  # the victim's container is stopped (or gone)
