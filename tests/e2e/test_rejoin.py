"""An agent on another machine (``jetyard serve agent``, given ``<data-dir>/nats.env``) rejoins
by itself when ``jetyard up`` restarts: ``up`` keeps its NATS port and token, the agent's
connection retries without limit, and its log says it lost NATS and got it back. Refused on
reconnect (a wrong token), it says so plainly and keeps trying."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from jetyard.runtime.natsserver import NatsServer, free_port
from schemas.ids import new_id
from tests.e2e.conftest import TEST_IMAGE, Jetyard, wait_until
from tests.e2e.test_session_path import CREATE, TERMINATE, wait_status

NODES = "{ nodes { id hostname lost cordoned state } }"
HEARTBEAT_TTL_S = 15.0  # 3 x the default heartbeat interval (JETYARD_NATS_HEARTBEAT_INTERVAL_S)


@dataclass
class OutsideAgent:
    hostname: str
    log: Path
    process: subprocess.Popen[bytes]

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_said(self, text: str, timeout: float = 60.0) -> None:
        wait_until(lambda: text in self.said(), f"the agent said {text!r}", timeout)


StartAgent = Callable[[dict[str, str]], OutsideAgent]


@pytest.fixture
def outside_agent(tmp_path: Path) -> Iterator[StartAgent]:
    """Start ``jetyard serve agent`` as on another machine: its own data dir and host name,
    NATS as ``nats.env`` says. The test's agents are killed at the end whatever happened."""
    started: list[OutsideAgent] = []

    def start(nats: dict[str, str]) -> OutsideAgent:
        hostname = f"elsewhere-{new_id()[:8]}"
        log = tmp_path / f"{hostname}.log"
        env = {
            **os.environ,
            "JETYARD_NATS_URL": nats["JETYARD_NATS_URL"],
            "JETYARD_NATS_TOKEN": nats["JETYARD_NATS_TOKEN"],
            "JETYARD_AGENT_BACKEND": "simulated",
            "JETYARD_AGENT_HOSTNAME": hostname,
            "JETYARD_AGENT_DATA_DIR": str(tmp_path / hostname),
        }
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [str(Path(sys.executable).parent / "jetyard"), "serve", "agent"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )
        agent = OutsideAgent(hostname, log, process)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        if agent.process.poll() is None:
            agent.process.kill()
            agent.process.wait()


def _nodes(stack: Jetyard) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = stack.gql(NODES)["data"]["nodes"]
    return found


@pytest.mark.timeout(240)
def test_an_agent_elsewhere_rejoins_by_itself_when_up_restarts(
    tmp_path: Path, outside_agent: StartAgent
) -> None:
    data, port = tmp_path / "data", free_port()
    stack = Jetyard(data, port, "simulated").start()
    nats = stack.nats_env()
    agent = outside_agent(nats)
    wait_until(lambda: len(_nodes(stack)) == 2, "both agents registered")

    assert stack.stop() == 0
    agent.wait_said(f"lost the connection to NATS at {nats['JETYARD_NATS_URL']}; retrying")

    again = Jetyard(data, port, "simulated").start()
    restarted_at = time.monotonic()
    assert again.nats_env() == nats  # the same port and token: nothing to tell the agent
    agent.wait_said(f"reconnected to NATS at {nats['JETYARD_NATS_URL']}")
    assert agent.process.poll() is None
    assert nats["JETYARD_NATS_TOKEN"] not in agent.said()

    # It still takes work: with up's own node cordoned, a session can only run there.
    by_host = {n["hostname"]: n for n in _nodes(again)}
    assert set(by_host) >= {agent.hostname} and len(by_host) == 2
    ours = next(n for host, n in by_host.items() if host != agent.hostname)
    cordon = again.gql(
        "mutation($id: ID!) { cordonNode(id: $id) { status message } }", id=ours["id"]
    )
    assert cordon["data"]["cordonNode"]["status"] == "ACCEPTED", cordon
    created = again.gql(CREATE, input={"image": TEST_IMAGE, "command": ["sleep", "600"]})
    session_id = created["data"]["createSession"]["sessionId"]
    running = wait_status(again, session_id, {"RUNNING"}, timeout=60)
    assert running["nodeIds"] == [by_host[agent.hostname]["id"]]

    # Past a heartbeat TTL after the restart it is still registered and not lost.
    time.sleep(max(0.0, HEARTBEAT_TTL_S + 2 - (time.monotonic() - restarted_at)))
    elsewhere = next(n for n in _nodes(again) if n["hostname"] == agent.hostname)
    assert not elsewhere["lost"], elsewhere
    assert wait_status(again, session_id, {"RUNNING"})["nodeIds"] == running["nodeIds"]

    ended = again.gql(TERMINATE, id=session_id)
    assert ended["data"]["terminateSession"]["status"] == "ACCEPTED", ended
    wait_status(again, session_id, {"TERMINATED"})
    assert again.stop() == 0


def test_an_agent_refused_on_reconnect_says_so_and_keeps_trying(
    tmp_path: Path, outside_agent: StartAgent
) -> None:
    right, wrong = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    server = NatsServer(data_dir=tmp_path / "nats", token=right).start()
    try:
        agent = outside_agent({"JETYARD_NATS_URL": server.url, "JETYARD_NATS_TOKEN": right})
        agent.wait_said("agent ready")

        server.stop()  # restarted on the same store and port with another token
        server.token = wrong
        server.start()
        agent.wait_said(f"lost the connection to NATS at {server.url}; retrying")
        agent.wait_said("refuses this client's token (authorization violation)")
        assert agent.process.poll() is None  # still trying

        server.stop()
        server.token = right
        server.start()
        agent.wait_said(f"reconnected to NATS at {server.url}")
        assert agent.process.poll() is None
        said = agent.said()
        assert right not in said and wrong not in said

        agent.process.send_signal(signal.SIGTERM)
        assert agent.process.wait(30) == 0
        assert "agent stopped" in agent.said()
    finally:
        server.stop()
